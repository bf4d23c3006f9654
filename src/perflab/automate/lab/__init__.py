"""The lab: many test boxes, one queue per box on a Celery/Redis broker, one shared store.

- app.py: the Celery app (queue per box, one job at a time, late acknowledgement)
  and the Redis keys the lab keeps beside Celery's own (heartbeats, submissions).
- worker.py: `perflab worker`: the task that runs one atomic job with the one
  runner (perflab.runner.loop.run_jobs), the heartbeat thread, cancellation.
- spool.py: every run is recorded first in a local SQLite spool and then
  imported into the shared store (deduplicated by run uuid), so that results
  outlive a store that is down.
- client.py: `perflab submit`, `perflab queue`, `perflab cancel`.
"""
