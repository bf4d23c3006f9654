"""The news feed: a batch of Usenet articles generated from a seed (untimed set-up).

The batch is in the format rnews reads: each article is preceded by a line
`#! rnews N` giving its length in bytes. The articles carry the headers B and
C news look at (Path, From, Newsgroups, Subject, Message-ID, Date; Expires on
a few, Control on the cancel messages), bodies of a log-normal number of
lines (median about 1.5 kB, a long tail, as Usenet articles were: the paper's
test batch averaged 1.7 kB), cross-posting to 2-4 groups on about a third of
them, a few duplicates (the same article arriving again by another path) and
a few cancel control messages for articles filed earlier.

The same seed gives the same bytes on every machine: the generator uses only
Python's random.Random(seed) and integer arithmetic.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

# 13 Jan 1986 00:00 GMT, the week of the paper's in-core active file (c.10-c.13).
BASE_TIME = 505_958_400
SPAN_DAYS = 14                  # the feed's dates spread over two weeks, the paper's retention
DUPLICATE_FRACTION = 0.05
CANCEL_FRACTION = 0.01
EXPIRES_FRACTION = 0.02
CROSSPOST_FRACTION = 0.33

_TOPS = ["comp", "sci", "rec", "news", "soc", "talk", "misc", "alt"]
_SECOND = ["os", "lang", "arch", "unix", "sys", "protocols", "sources", "graphics", "databases", "mail",
           "physics", "math", "med", "crypt", "space", "arts", "games", "music", "autos", "bicycles",
           "admin", "software", "groups", "culture", "politics", "jobs", "forsale", "wanted", "religion"]
_THIRD = ["linux", "c", "misc", "wizards", "questions", "bsd", "minix", "announce", "d", "bugs", "lisp",
          "ada", "sun", "vax", "pc", "mac", "tcp-ip", "uucp", "x", "theory", "research", "policy", "stats"]
_WORDS = ("the news article batch file kernel disk system time process history active expire rnews "
          "performance fork exec directory inode namei cache buffer read write stat link unlink path "
          "site group message header body posting follow-up reply question answer bug fix patch release "
          "version machine vax sun unix berkeley toronto usenet network modem uucp batch queue").split()
_NAMES = ["geoff", "henry", "utzoo", "utcsri", "rick", "mark", "matt", "steve", "tom", "laura", "john",
          "ian", "mike", "dennis", "dmr", "ken", "bwk", "rob", "doug", "peter"]
_SITES = ["utzoo", "utcsri", "utfraser", "decvax", "ihnp4", "seismo", "ucbvax", "allegra", "linus", "watmath"]
_DAYS = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]      # 1 Jan 1970 was a Thursday
_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

# The sys file: who gets what (the site ME is this one). Patterns as C news reads them:
# `all`, a hierarchy prefix, `!` to exclude; the last pattern that matches decides.
SYS_FILE = """\
ME:all::
utzoo:all,!alt,!talk:F:
utcsri:comp,news,sci:F:
utfraser:all,!rec,rec.arts:F:
"""
SITES = ["utzoo", "utcsri", "utfraser"]
SPECIAL_GROUPS = ["control", "junk"]


@dataclass
class Article:
    number: int                    # position in the feed, from 0
    message_id: str
    groups: list[str]
    date: int                      # seconds since the epoch (the Date header; arrival time)
    expires: int | None
    control_target: str | None     # the Message-ID a cancel message cancels
    duplicate_of: int | None       # the feed position of the article this one repeats
    data: bytes


@dataclass
class Feed:
    groups: list[str]
    articles: list[Article]
    end_time: int                  # "now" for expire: one minute after the last article's date
    bytes: int = 0
    extra: dict = field(default_factory=dict)


def group_names(count: int, seed: int) -> list[str]:
    """`count` distinct newsgroup names (comp.os.linux, sci.physics, ...), two or three levels deep."""
    rng = random.Random(f"groups-{seed}")
    names = [f"{t}.{s}" for t in _TOPS for s in _SECOND]
    names += [f"{t}.{s}.{u}" for t in _TOPS for s in _SECOND for u in _THIRD]
    if count > len(names):
        raise ValueError(f"at most {len(names)} groups")
    rng.shuffle(names)
    return sorted(names[:count])


def max_groups() -> int:
    return len(_TOPS) * len(_SECOND) * (1 + len(_THIRD))


def rfc822_date(t: int) -> str:
    days, rest = divmod(t, 86400)
    hh, rest = divmod(rest, 3600)
    mm, ss = divmod(rest, 60)
    y, m, d = _civil(days)
    return f"{_DAYS[days % 7]}, {d:02d} {_MONTHS[m - 1]} {y} {hh:02d}:{mm:02d}:{ss:02d} GMT"


def _civil(days: int) -> tuple[int, int, int]:
    """Days since 1970-01-01 -> (year, month, day), proleptic Gregorian (Howard Hinnant's algorithm)."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return y + (m <= 2), m, d


def _body(rng: random.Random) -> bytes:
    lines = max(1, min(3000, int(rng.lognormvariate(3.1, 1.0))))
    out = []
    for _ in range(lines):
        words, length = [], 0
        target = rng.randint(20, 72)
        while length < target:
            w = rng.choice(_WORDS)
            words.append(w)
            length += len(w) + 1
        out.append(" ".join(words))
    return ("\n".join(out) + "\n").encode()


def generate(articles: int, groups: int, seed: int) -> Feed:
    """The feed of `articles` articles over `groups` newsgroups, from `seed`."""
    rng = random.Random(seed)
    names = group_names(groups, seed)
    # Popularity: Zipf-like, a few busy groups and a long tail.
    weights = [1.0 / (i + 1) ** 0.8 for i in range(len(names))]
    order = names[:]
    rng.shuffle(order)
    step = SPAN_DAYS * 86400 / max(1, articles)
    out: list[Article] = []
    originals: list[int] = []          # feed positions of ordinary, first-arrival articles
    t = float(BASE_TIME)
    for i in range(articles):
        t += rng.uniform(0.2, 1.8) * step
        date = int(t)
        r = rng.random()
        if r < DUPLICATE_FRACTION and originals:
            first = out[rng.choice(originals)]
            path = f"{rng.choice(_SITES)}!{rng.choice(_SITES)}!"
            data = first.data.replace(b"Path: ", b"Path: " + path.encode(), 1)
            out.append(Article(i, first.message_id, first.groups, first.date, first.expires, None,
                               first.number, data))
            continue
        author = rng.choice(_NAMES)
        site = rng.choice(_SITES)
        message_id = f"<{i}.{rng.randrange(1 << 30):x}@{site}.UUCP>"
        headers = [f"Path: {rng.choice(_SITES)}!{site}!{author}",
                   f"From: {author}@{site}.UUCP ({author.capitalize()})"]
        control_target = None
        expires = None
        if r < DUPLICATE_FRACTION + CANCEL_FRACTION and originals:
            target = out[rng.choice(originals)]
            control_target = target.message_id
            chosen = target.groups
            headers += [f"Newsgroups: {','.join(chosen)}", f"Subject: cmsg cancel {control_target}",
                        f"Control: cancel {control_target}"]
            body = b"This article was cancelled from within rn.\n"
        else:
            k = 1 if rng.random() >= CROSSPOST_FRACTION else rng.randint(2, 4)
            chosen = []
            while len(chosen) < min(k, len(order)):
                g = rng.choices(order, weights)[0]
                if g not in chosen:
                    chosen.append(g)
            headers += [f"Newsgroups: {','.join(chosen)}",
                        f"Subject: {' '.join(rng.choice(_WORDS) for _ in range(rng.randint(2, 7)))}"]
            body = _body(rng)
            if rng.random() < EXPIRES_FRACTION:
                expires = date + int(rng.uniform(1, 2 * SPAN_DAYS) * 86400)
        headers += [f"Message-ID: {message_id}", f"Date: {rfc822_date(date)}"]
        if expires is not None:
            headers.append(f"Expires: {rfc822_date(expires)}")
        lines = body.count(b"\n")
        headers += [f"Organization: {site} site", f"Lines: {lines}"]
        data = ("\n".join(headers) + "\n\n").encode() + body
        out.append(Article(i, message_id, chosen, date, expires, control_target, None, data))
        if control_target is None:
            originals.append(i)
    end = int(t) + 60
    return Feed(names, out, end, sum(len(a.data) for a in out))


def write(feed: Feed, directory: Path) -> None:
    """The batch (`feed`), the active file's groups (`groups`) and the sys file (`sys`) in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "feed", "wb") as f:
        for a in feed.articles:
            f.write(b"#! rnews %d\n" % len(a.data))
            f.write(a.data)
    (directory / "groups").write_text("".join(f"{g}\n" for g in [*SPECIAL_GROUPS, *feed.groups]))
    (directory / "sys").write_text(SYS_FILE)


def expire_cutoff(feed: Feed, expire_days: float) -> int:
    """Articles that arrived at or before this time expire (unless their Expires header says otherwise)."""
    return feed.end_time - int(round(expire_days * 86400))


def expected_spool(feed: Feed, expire_days: float | None) -> dict:
    """What a correct news system holds after filing the feed (and expiring, when expire_days is given).

    Returns {"files": {relative path: bytes}, "history": {message-id: [group/number...]},
    "active": {group: high}}: duplicates refused, cross-posts in every group, control
    messages in `control`, cancelled articles gone, expired ones gone with their history lines.
    """
    high = {g: 0 for g in [*SPECIAL_GROUPS, *feed.groups]}
    history: dict[str, list[str]] = {}
    where: dict[str, list[str]] = {}
    dates: dict[str, tuple[int, int | None]] = {}
    files: dict[str, bytes] = {}
    for a in feed.articles:
        if a.message_id in history:
            continue
        groups = ["control"] if a.control_target else [g for g in a.groups if g in high] or ["junk"]
        entries = []
        for g in groups:
            high[g] += 1
            entries.append(f"{g}/{high[g]}")
            files[f"{g.replace('.', '/')}/{high[g]}"] = a.data
        history[a.message_id] = entries
        dates[a.message_id] = (a.date, a.expires)
        if a.control_target and a.control_target in history:
            for e in history[a.control_target]:
                g, n = e.rsplit("/", 1)
                files.pop(f"{g.replace('.', '/')}/{n}", None)
        where[a.message_id] = entries
    if expire_days is not None:
        cutoff = expire_cutoff(feed, expire_days)
        for mid, (date, expires) in list(dates.items()):
            gone = expires <= feed.end_time if expires is not None else date <= cutoff
            if gone:
                for e in history.pop(mid):
                    g, n = e.rsplit("/", 1)
                    files.pop(f"{g.replace('.', '/')}/{n}", None)
    return {"files": files, "history": history, "active": high}
