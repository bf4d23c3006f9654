"""The bottom layer: value types, errors, units, text, configuration, the machine's facts,
metric names, process value types, the C compile cache, parameter and git helpers.

Nothing here imports another perflab package (docs/architecture.md).
"""
