"""The `news` family: the C News workload (Collyer & Spencer, "News Need Not Be Slow").

A feed of Usenet articles generated from a seed (news/feed.py: sizes, headers,
cross-posts, duplicates, cancel messages; untimed set-up in the session) is
filed into a news spool (a newsgroup directory tree, the active file, the
history file and its index, per-site batch files), then the articles older
than `expire_days` are expired. `style: bnews` files and expires with the
habits the paper measured in B news, `style: cnews` with the fixes it
describes (see c/news.c and docs/news.md).

One repetition is three processes, all started by the runner: `news reset`
(a fresh spool; untimed, not recorded), `news file` (the rnews of the
paper's appendix log) and `news expire`. Each timed phase gets its own wall,
user and system time from the launcher (wait4: the per-article rnews
processes of bnews are children of the filer and are counted), recorded per
article of the feed. The filing phase also records the totals as
time.elapsed_time / time.user_time / time.system_time, so that
`perflab log news --per ARTICLES` prints the paper's appendix log.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from perflab.core import cbuild
from perflab.benchmarks import protocol
from perflab.benchmarks.base import STOP, Family, ItemFailed, Metric, Params, Session, catalog_of, job_timeout
from perflab.benchmarks.news import feed as feedmod
from perflab.core.params import in_range
from perflab.core.model import LOWER_IS_BETTER, Sample
from perflab.core.process import ProcessResult, ProcessSpec
from perflab.execution.vm.disk import workdir     # the host's directory, or a guest's disk
from perflab.execution.workdir import WorkdirParams

SOURCE_DIR = Path(__file__).resolve().parent / "c"
BUILD_FLAGS: tuple[str, ...] = ("-O2",)
MAX_ARTICLES = 1_000_000

PHASES = ("file", "expire")
METRICS = {
    f"news.{phase}{kind}_s_per_article": Metric(
        f"news.{phase}{kind}_s_per_article", "s", LOWER_IS_BETTER,
        f"{what} time of the {phase} phase divided by the feed's articles")
    for phase in PHASES
    for kind, what in (("", "real (wall-clock)"), ("_user", "user CPU"), ("_sys", "system CPU"))
}
# The paper's appendix log is rnews's real/user/sys: the filing phase's totals under the
# names `perflab log` reads (divide with --per ARTICLES).
LOG_METRICS = catalog_of(
    Metric("time.elapsed_time", "s", LOWER_IS_BETTER, "filing phase: wall-clock time, total"),
    Metric("time.user_time", "s", LOWER_IS_BETTER, "filing phase: user CPU time, total"),
    Metric("time.system_time", "s", LOWER_IS_BETTER, "filing phase: system CPU time, total"),
)
# The counts a phase prints (the runtime's metric lines, news.PHASE.COUNT).
COUNTS = ("articles", "accepted", "duplicates", "cancels", "links", "expired", "kept")


class NewsParams(Params, WorkdirParams):
    style: Literal["bnews", "cnews"] = Field(
        "cnews", description="bnews: B news's habits the paper measured; cnews: C news's fixes")
    articles: Annotated[int, in_range(1, MAX_ARTICLES)] = Field(
        1000, description=f"articles in the feed, duplicates and control messages included (1..{MAX_ARTICLES})")
    groups: Annotated[int, in_range(1, feedmod.max_groups())] = Field(
        100, description=f"newsgroups in the active file (1..{feedmod.max_groups()})")
    seed: Annotated[int, in_range(0, 2**63 - 1, "must be a whole number from 0 to 2^63-1")] = Field(
        1, description="seed of the generated feed (same seed, same bytes)")
    expire_days: Annotated[float, in_range(0, 36500, "must be a number of days from 0 to 36500")] = Field(
        7.0, description=f"expire articles older than this many days (the feed's dates span {feedmod.SPAN_DAYS} days)")



def build() -> Path:
    """The news program (compiled on first use, cached by cbuild)."""
    return cbuild.build("news", SOURCE_DIR, flags=BUILD_FLAGS)


def phase_argv(binary: str, phase: str, style: str, spool: str, init: str, feed: feedmod.Feed,
               expire_days: float) -> list[str]:
    """The command line of one phase: reset, file or expire."""
    if phase == "reset":
        return [binary, "reset", "-S", spool, "-I", init]
    if phase == "file":
        return [binary, "file", "-s", style, "-S", spool, "-f", str(Path(init) / "feed")]
    return [binary, "expire", "-s", style, "-S", spool, "-n", str(feed.end_time),
            "-c", str(feedmod.expire_cutoff(feed, expire_days))]


class NewsSession(Session):
    def __init__(self, params: NewsParams, job: dict, binary: Path, root: str, feed: feedmod.Feed, facts: dict):
        self.p = params
        self.binary = str(binary)
        self.init = str(Path(root) / "init")
        self.spool = str(Path(root) / "spool")
        self.feed = feed
        # bnews files at a few ms per article here; its linear history search grows with the feed.
        self.timeout = job_timeout(job, 120 + params.articles * (0.05 + params.articles * 2e-6))
        stored = params.model_dump()
        stored.pop("dir")
        if stored["fs"] is None:
            stored.pop("fs")
            stored.pop("fs_size")
        super().__init__(name=f"news {params.style} {params.articles} articles", params=stored, facts=facts)

    def processes(self, repetition: int) -> list[ProcessSpec]:
        def spec(phase: str, record: bool = True) -> ProcessSpec:
            argv = phase_argv(self.binary, phase, self.p.style, self.spool, self.init, self.feed, self.p.expire_days)
            return ProcessSpec(argv, item=phase, cwd=self.init, timeout=self.timeout, record=record)

        return [spec("reset", record=False), spec("file"), spec("expire")]

    def parse(self, spec: ProcessSpec, result: ProcessResult) -> list[Sample]:
        phase = spec.item
        counts = parse_counts(phase, result.stdout)
        if phase == "file" and counts["articles"] != self.p.articles:
            raise ItemFailed(f"file: filed {counts['articles']} articles of a feed of {self.p.articles}")
        if phase == "file" and counts["accepted"] + counts["duplicates"] != counts["articles"]:
            raise ItemFailed(f"file: {counts['accepted']} accepted + {counts['duplicates']} duplicates "
                             f"is not {counts['articles']} articles")
        n = self.p.articles
        out = [Sample(f"news.{phase}_s_per_article", result.wall / n, "s", LOWER_IS_BETTER),
               Sample(f"news.{phase}_user_s_per_article", result.user / n, "s", LOWER_IS_BETTER),
               Sample(f"news.{phase}_sys_s_per_article", result.sys / n, "s", LOWER_IS_BETTER)]
        if phase == "file":
            out += [Sample("time.elapsed_time", result.wall, "s", LOWER_IS_BETTER),
                    Sample("time.user_time", result.user, "s", LOWER_IS_BETTER),
                    Sample("time.system_time", result.sys, "s", LOWER_IS_BETTER)]
        return out


def parse_counts(phase: str, text: str) -> dict:
    """The metric lines a phase prints -> its counts by name; ItemFailed on anything else."""
    raw = {f"news.{phase}.{k}": "links" if k == "links" else "articles" for k in COUNTS}
    figures = protocol.Figures(phase, text, raw)
    counts = {k: figures.one(f"news.{phase}.{k}") for k in COUNTS}
    if not all(isinstance(v, int) for v in counts.values()):
        raise ItemFailed(f"{phase}: counts {counts} are not whole numbers")
    return counts


class NewsFamily(Family):
    name = "news"
    summary = "the C News workload: file a feed of articles, then expire (style bnews or cnews)"
    Params = NewsParams
    failure_policy = STOP      # a failed filing leaves a spool later phases cannot be compared on
    # secondary_metrics: perflab.benchmarks.SECONDARY_METRICS
    default_runs = 3
    catalog = {**METRICS, **LOG_METRICS}

    @contextmanager
    def session(self, params: NewsParams, job: dict) -> Iterator[NewsSession]:
        binary = build()
        with workdir(params, "news") as wd:
            feed = feedmod.generate(params.articles, params.groups, params.seed)
            feedmod.write(feed, Path(wd.path) / "init")
            facts = {**wd.facts, "news_feed_bytes": feed.bytes,
                     "news_mean_article_bytes": round(feed.bytes / len(feed.articles), 1)}
            yield NewsSession(params, job, binary, wd.path, feed, facts)


FAMILY = NewsFamily()
