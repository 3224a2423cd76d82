"""Generate realistic Snowplow enriched events with a long-tail duplicate distribution.

What is generated (deterministic for a given seed and size):
  - page views, structured events and self-describing events (link_click, change_form) with custom
    contexts (web_page) and derived contexts (ua_parser_context), about 1 KB a line;
  - about `duplicate_share` of event ids shared by more than one event, with a long tail (most shared ids
    have 2 events, a few have thousands);
  - natural copies (the same event again, possibly re-enriched later: same fingerprint) and synthetic
    copies (same id, other client-sent fields: another fingerprint), large clusters being synthetic (bots
    with a broken random number generator);
  - some events without `event_fingerprint` (enrichment off), and a few malformed lines;
  - copies spread over `batches` folders (`batch=1`, `batch=2`, …) when asked, for cross-batch dedup.

`tail="heavy"` draws the copies of a shared id from a Pareto(1.2) law up to 5,000 (the events built from real
Snowplow events that the performance work measures against: 1% of ids copied, half of the copies synthetic with
`synthetic_share=0.5`), each copy synthetic by `synthetic_share` alone, whatever the size of its group.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

from jobs.enriched.fields import DEFAULT_FINGERPRINT_FIELDS, FIELD_COUNT, FIELD_INDEX
from jobs.errors import InvalidArgumentError

START = datetime(2026, 11, 1, tzinfo=UTC)
PAGES = ["/", "/pricing", "/docs/getting-started", "/blog/dedup-at-scale", "/product/winnow", "/signup", "/careers"]
TITLES = ["Winnow", "Pricing - Winnow", "Getting started", "Dedup at scale", "Product", "Sign up", "Careers"]
AGENTS = [
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
     "Chrome", "Chrome", "131.0", "Browser", "WEBKIT", "Windows 10", "Windows", "Microsoft Corporation", "Computer", "0"),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
     "Safari 18", "Safari", "18.1", "Browser", "WEBKIT", "Mac OS X", "Mac OS X", "Apple Inc.", "Computer", "0"),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
     "Mobile Safari", "Safari", "18.1", "Browser (mobile)", "WEBKIT", "iOS 18", "iOS", "Apple Inc.", "Mobile", "1"),
    ("Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
     "Firefox 133", "Firefox", "133.0", "Browser", "GECKO", "Linux", "Linux", "Other", "Computer", "0"),
]  # fmt: skip
GEOS = [("GB", "ENG", "London", "EC1A", 51.5072, -0.1276, "England", "Europe/London"),
        ("US", "CA", "San Francisco", "94103", 37.7749, -122.4194, "California", "America/Los_Angeles"),
        ("DE", "BE", "Berlin", "10115", 52.52, 13.405, "Berlin", "Europe/Berlin"),
        ("FR", "IDF", "Paris", "75001", 48.8566, 2.3522, "Ile-de-France", "Europe/Paris")]  # fmt: skip
CONTEXTS = "iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-0"
UNSTRUCT = "iglu:com.snowplowanalytics.snowplow/unstruct_event/jsonschema/1-0-0"


@dataclass(frozen=True)
class GenerateOptions:
    """What `python -m jobs generate` makes."""

    events: int
    seed: int = 1
    batches: int = 1
    files: int = 1
    gzip: bool = False
    duplicate_share: float = 0.01
    synthetic_share: float = 0.4
    without_fingerprint_share: float = 0.1
    bad_share: float = 0.001
    tail: str = "long"
    """"long": Pareto(1.5) copies per shared id up to events / 250; "heavy": see the module docstring."""

    def __post_init__(self) -> None:
        if self.tail not in TAILS:
            raise InvalidArgumentError(f"--tail: given {self.tail!r}; allowed: {', '.join(TAILS)}")
        for name in ("events", "batches", "files"):
            if getattr(self, name) < 1:
                raise InvalidArgumentError(f"--{name}: given {getattr(self, name)}; allowed: a whole number >= 1")
        for name in ("duplicate_share", "synthetic_share", "without_fingerprint_share", "bad_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                option = "--" + name.replace("_", "-")
                raise InvalidArgumentError(f"{option}: given {getattr(self, name)}; allowed: a share from 0 to 1")


LONG_TAIL_ALPHA = 1.5
"""P(k) ∝ k^-2.5 for k >= 2: about 70% pairs, a few ids with hundreds or thousands of events."""
HEAVY_TAIL_ALPHA = 1.2
HEAVY_TAIL_MAX_COPIES = 5000
TAILS = ("long", "heavy")


def copies_per_id(rng: random.Random, duplicate_share: float, max_copies: int, alpha: float = LONG_TAIL_ALPHA) -> int:
    """How many events share one id: 1 mostly; otherwise Pareto(`alpha`) from 2, up to `max_copies`."""
    if rng.random() >= duplicate_share:
        return 1
    return min(max_copies, int(2 * (1 - rng.random()) ** (-1 / alpha)))


class EventFactory:
    """Builds enriched-event lines; every random choice comes from the one seeded generator."""

    def __init__(self, rng: random.Random, without_fingerprint_share: float) -> None:
        self.rng = rng
        self.without_fingerprint_share = without_fingerprint_share

    def event(self, event_id: str, when: datetime) -> list[str]:
        """A fresh event (131 fields) for `event_id`, sent around `when`."""
        rng = self.rng
        f = [""] * FIELD_COUNT
        kind = rng.choices(("page_view", "struct", "link_click", "change_form"), weights=(55, 20, 15, 10))[0]
        page = rng.randrange(len(PAGES))
        agent = AGENTS[rng.randrange(len(AGENTS))]
        geo = GEOS[rng.randrange(len(GEOS))]
        user = uuid.UUID(int=rng.getrandbits(128), version=4)
        session = uuid.UUID(int=rng.getrandbits(128), version=4)
        created = when - timedelta(milliseconds=rng.randrange(50, 5000))
        campaign = rng.random() < 0.3
        query = f"utm_source=newsletter&utm_medium=email&ref={rng.randrange(10**6)}" if campaign else ""
        url = f"https://www.example.com{PAGES[page]}" + (f"?{query}" if campaign else "")
        set_fields(f, {
            "app_id": "winnow-web", "platform": rng.choice(("web", "web", "mob")), "event_id": event_id,
            "collector_tstamp": tstamp(when), "dvce_created_tstamp": tstamp(created),
            "dvce_sent_tstamp": tstamp(when - timedelta(milliseconds=rng.randrange(5, 40))),
            "etl_tstamp": tstamp(when + timedelta(seconds=rng.randrange(30, 300))),
            "derived_tstamp": tstamp(when - timedelta(milliseconds=rng.randrange(50, 5000))),
            "name_tracker": "sp", "v_tracker": "js-4.1.0", "v_collector": "ssc-3.2.0-kinesis", "v_etl": "snowplow-enrich-kinesis-5.1.0",
            "user_ipaddress": f"203.0.{rng.randrange(256)}.{rng.randrange(1, 255)}", "network_userid": str(user),
            "domain_userid": str(user)[:18] + "0" * 18, "domain_sessionidx": str(rng.randrange(1, 40)),
            "domain_sessionid": str(session), "user_fingerprint": str(rng.randrange(10**9, 10**10)),
            "geo_country": geo[0], "geo_region": geo[1], "geo_city": geo[2], "geo_zipcode": geo[3],
            "geo_latitude": str(geo[4]), "geo_longitude": str(geo[5]), "geo_region_name": geo[6], "geo_timezone": geo[7],
            "page_url": url, "page_title": TITLES[page], "page_referrer": "https://www.google.com/",
            "page_urlscheme": "https", "page_urlhost": "www.example.com", "page_urlport": "443",
            "page_urlpath": PAGES[page], "page_urlquery": query,
            "refr_urlscheme": "https", "refr_urlhost": "www.google.com", "refr_urlport": "443", "refr_urlpath": "/",
            "refr_medium": "search", "refr_source": "Google",
            "useragent": agent[0], "br_name": agent[1], "br_family": agent[2], "br_version": agent[3], "br_type": agent[4],
            "br_renderengine": agent[5], "br_lang": rng.choice(("en-GB", "en-US", "de-DE", "fr-FR")),
            "br_features_pdf": "1", "br_features_flash": "0", "br_features_java": "0", "br_features_director": "0",
            "br_features_quicktime": "0", "br_features_realplayer": "0", "br_features_windowsmedia": "0",
            "br_features_gears": "0", "br_features_silverlight": "0", "br_cookies": "1", "br_colordepth": "24",
            "br_viewwidth": str(rng.choice((1280, 1440, 390, 1920))), "br_viewheight": str(rng.choice((720, 900, 844, 1080))),
            "os_name": agent[6], "os_family": agent[7], "os_manufacturer": agent[8], "os_timezone": geo[7],
            "dvce_type": agent[9], "dvce_ismobile": agent[10], "dvce_screenwidth": "1920", "dvce_screenheight": "1080",
            "doc_charset": "UTF-8", "doc_width": "1280", "doc_height": str(rng.randrange(800, 9000)),
        })  # fmt: skip
        page_id = uuid.UUID(int=rng.getrandbits(128), version=4)
        custom: list[dict[str, object]] = [
            {"schema": "iglu:com.snowplowanalytics.snowplow/web_page/jsonschema/1-0-0", "data": {"id": str(page_id)}}
        ]
        if kind == "page_view":
            custom.append({"schema": "iglu:org.schema/WebPage/jsonschema/1-0-0",
                           "data": {"genre": "product", "author": "Winnow", "inLanguage": "en-GB"}})  # fmt: skip
        f[FIELD_INDEX["contexts"]] = compact({"schema": CONTEXTS, "data": custom})
        derived = [{"schema": "iglu:com.snowplowanalytics.snowplow/ua_parser_context/jsonschema/1-0-0",
                    "data": {"useragentFamily": agent[2], "useragentMajor": agent[3].split(".")[0],
                             "useragentMinor": agent[3].split(".")[1], "osFamily": agent[7],
                             "deviceFamily": "iPhone" if agent[10] == "1" else "Other"}}]  # fmt: skip
        if rng.random() < 0.6:  # the UA parser enrichment is not on everywhere
            f[FIELD_INDEX["derived_contexts"]] = compact({"schema": CONTEXTS, "data": derived})
        if campaign:
            set_fields(f, {"mkt_medium": "email", "mkt_source": "newsletter"})
        if kind == "page_view":
            set_fields(f, {"event": "page_view", "event_vendor": "com.snowplowanalytics.snowplow", "event_name": "page_view",
                           "event_format": "jsonschema", "event_version": "1-0-0"})  # fmt: skip
        elif kind == "struct":
            set_fields(f, {"event": "struct", "se_category": "video", "se_action": rng.choice(("play", "pause", "seek")),
                           "se_label": f"video-{rng.randrange(500)}", "se_property": "hd", "se_value": str(rng.randrange(600)),
                           "event_vendor": "com.google.analytics", "event_name": "event", "event_format": "jsonschema",
                           "event_version": "1-0-0"})  # fmt: skip
        else:
            name, data = self._self_describing(kind)
            f[FIELD_INDEX["unstruct_event"]] = compact(
                {"schema": UNSTRUCT, "data": {"schema": f"iglu:com.snowplowanalytics.snowplow/{name}", "data": data}}
            )
            set_fields(f, {"event": "unstruct", "event_vendor": "com.snowplowanalytics.snowplow",
                           "event_name": name.split("/")[0], "event_format": "jsonschema", "event_version": name.rsplit("/", 1)[1]})  # fmt: skip
        if rng.random() >= self.without_fingerprint_share:
            f[FIELD_INDEX["event_fingerprint"]] = fingerprint(f)
        return f

    def _self_describing(self, kind: str) -> tuple[str, dict[str, object]]:
        rng = self.rng
        if kind == "link_click":
            return "link_click/jsonschema/1-0-1", {
                "elementId": f"cta-{rng.randrange(40)}", "elementClasses": ["btn", "btn-primary"], "elementTarget": "_blank",
                "targetUrl": f"https://www.example.com/out/{rng.randrange(10**5)}", "elementContent": "Read more"}  # fmt: skip
        return "change_form/jsonschema/1-0-0", {
            "formId": "signup", "elementId": rng.choice(("email", "name", "company")), "nodeName": "INPUT", "type": "text",
            "elementClasses": ["form-control"], "value": f"value-{rng.randrange(10**6)}"}  # fmt: skip

    def natural_copy(self, original: list[str]) -> list[str]:
        """The same event delivered again; sometimes re-enriched later (new etl_tstamp), same fingerprint."""
        copy = list(original)
        if self.rng.random() < 0.5:
            etl = parse_tstamp(copy[FIELD_INDEX["etl_tstamp"]]) + timedelta(seconds=self.rng.randrange(1, 3600))
            copy[FIELD_INDEX["etl_tstamp"]] = tstamp(etl)
        return copy

    def synthetic_copy(self, original: list[str]) -> list[str]:
        """Another event with the same id: a pre-cacher or bot sends other client-sent fields."""
        when = parse_tstamp(original[FIELD_INDEX["collector_tstamp"]]) + timedelta(
            seconds=self.rng.randrange(-600, 600)
        )
        copy = self.event(original[FIELD_INDEX["event_id"]], when)
        if original[FIELD_INDEX["event_fingerprint"]] == "":
            copy[FIELD_INDEX["event_fingerprint"]] = ""
        elif copy[FIELD_INDEX["event_fingerprint"]] == "":
            copy[FIELD_INDEX["event_fingerprint"]] = fingerprint(copy)
        return copy


def set_fields(f: list[str], values: dict[str, str]) -> None:
    for name, value in values.items():
        f[FIELD_INDEX[name]] = value


def tstamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def parse_tstamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)


def compact(document: object) -> str:
    return json.dumps(document, separators=(",", ":"))


def fingerprint(f: list[str]) -> str:
    """What an event fingerprint enrichment would write: MD5 over the client-sent fields."""
    digest = hashlib.md5(usedforsecurity=False)
    for name in DEFAULT_FINGERPRINT_FIELDS:
        digest.update(f[FIELD_INDEX[name]].encode("utf-8"))
        digest.update(b"\x1f")
    return digest.hexdigest()


MALFORMED = (
    lambda line: line.rsplit("\t", 3)[0],  # truncated: too few fields
    lambda line: line + "\textra",  # one field too many
    lambda line: "",  # empty line
    lambda line: line.replace(line.split("\t")[6], "not-a-uuid", 1),
    lambda line: line.replace(line.split("\t")[3], "yesterday", 1),
    lambda line: "\x00\x01binary garbage\x7f",
)


def _open_text(path: Path, compress: bool) -> IO[str]:
    if compress:
        return gzip.open(path, "wt", encoding="utf-8", newline="\n")
    return open(path, "w", encoding="utf-8", newline="\n")


# What `generate` writes under its output folder, and all that `--overwrite` may remove there.
GENERATED_FILE = re.compile(r"(batch=[1-9][0-9]*/)?part-[0-9]{5,}\.tsv(\.gz)?")


def prepare_output(output: Path, overwrite: bool) -> None:
    """Make `output` ready to hold only what this run generates: new or empty, or (`overwrite`) holding only what
    an earlier `generate` wrote, which is removed.

    Raises:
        InvalidArgumentError: `output` is a file; not empty without `overwrite`; or holds a file `generate` does
            not write (it would be read as input with the generated events, so it is never removed).
    """
    if not output.exists():
        return
    if not output.is_dir():
        raise InvalidArgumentError(f"--output: given {output}, which is a file; allowed: a new or empty folder")
    entries = sorted(output.rglob("*"))
    if not entries:
        return
    if not overwrite:
        raise InvalidArgumentError(
            f"--output: given {output}, which holds {len(entries):,} entries (e.g. {entries[0].relative_to(output)}); "
            "allowed: a new or empty folder, or --overwrite to replace what an earlier generate wrote there"
        )
    files = [entry for entry in entries if not entry.is_dir()]
    foreign = [entry for entry in files if not GENERATED_FILE.fullmatch(entry.relative_to(output).as_posix())]
    if foreign:
        raise InvalidArgumentError(
            f"--overwrite: {output} holds {foreign[0].relative_to(output)}, which generate does not write; allowed: a "
            "folder holding only part-NNNNN.tsv[.gz] files, directly or in batch=N/ folders (move the others away)"
        )
    for file in files:
        file.unlink()
    for folder in sorted((entry for entry in entries if entry.is_dir()), reverse=True):
        folder.rmdir()  # only batch=N/ folders can be here, now empty; rmdir refuses anything else


def generate(output: Path, options: GenerateOptions) -> dict[str, int]:
    """Write the events under `output`; return how many lines of each kind were written."""
    rng = random.Random(options.seed)
    factory = EventFactory(rng, options.without_fingerprint_share)
    heavy = options.tail == "heavy"
    max_copies, alpha = (
        (HEAVY_TAIL_MAX_COPIES, HEAVY_TAIL_ALPHA) if heavy else (max(2, options.events // 250), LONG_TAIL_ALPHA)
    )
    folders = [output] if options.batches == 1 else [output / f"batch={b + 1}" for b in range(options.batches)]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    suffix = ".tsv.gz" if options.gzip else ".tsv"
    files = [
        [_open_text(folder / f"part-{i:05d}{suffix}", options.gzip) for i in range(options.files)] for folder in folders
    ]
    stats = {
        "lines": 0,
        "event_ids": 0,
        "natural_copies": 0,
        "synthetic_copies": 0,
        "malformed": 0,
        "batches": len(folders),
    }
    span = timedelta(days=1).total_seconds() / options.events
    try:
        while stats["lines"] < options.events:
            event_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            when = START + timedelta(seconds=stats["lines"] * span)
            original = factory.event(event_id, when)
            group = [original]
            for _ in range(copies_per_id(rng, options.duplicate_share, max_copies, alpha) - 1):
                synthetic = (len(group) > 20 and not heavy) or rng.random() < options.synthetic_share
                group.append(factory.synthetic_copy(original) if synthetic else factory.natural_copy(group[-1]))
                stats["synthetic_copies" if synthetic else "natural_copies"] += 1
            stats["event_ids"] += 1
            for event in group[: options.events - stats["lines"]]:
                line = "\t".join(event)
                if rng.random() < options.bad_share:
                    line = rng.choice(MALFORMED)(line)
                    stats["malformed"] += 1
                files[rng.randrange(len(folders))][rng.randrange(options.files)].write(line + "\n")
                stats["lines"] += 1
    finally:
        for handles in files:
            for handle in handles:
                handle.close()
    return stats
