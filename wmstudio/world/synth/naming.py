"""How a synthetic world writes things: its key case, its voice, its ids, and the values its records hold.

Every choice here is drawn once per world (one world writes `unitPriceCents`, another `unit_price_cents`; one uses
13-digit numeric ids, another `pk_` plus 10 letters), so a model cannot learn one house style."""

from __future__ import annotations

import datetime as dt
import hashlib
import random
import re
import string as chars
from dataclasses import dataclass

from wmstudio.world.synth import names

BASE62 = chars.digits + chars.ascii_letters
HEX = "0123456789abcdef"
UPPER = chars.ascii_uppercase
STAMP = "%Y-%m-%dT%H:%M:%SZ"
RFC3339_PATTERN = r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\dZ"


@dataclass(frozen=True)
class Style:
    """A world's house style: `case` of every key ("snake" or "camel") and the `voice` of its messages."""

    case: str
    voice: str  # "terse", "plain" or "formal"

    def key(self, *phrases: str) -> str:
        """Words (spaces or underscores between them) as one key in this world's case: unit_price_cents."""
        words = [w for phrase in phrases for w in re.split(r"[\s_]+", phrase.strip()) if w]
        if self.case == "snake":
            return "_".join(w.lower() for w in words)
        return words[0].lower() + "".join(w[:1].upper() + w[1:].lower() for w in words[1:])


def code_word(*phrases: str) -> str:
    """Words as an error-code word: "seed packet" -> SEED_PACKET."""
    return "_".join(w.upper() for phrase in phrases for w in re.split(r"[\s_-]+", phrase) if w)


def slug(phrase: str) -> str:
    """Words as a URL segment: "seed packets" -> seed-packets."""
    return "-".join(w.lower() for w in re.split(r"[\s_]+", phrase) if w)


@dataclass(frozen=True)
class IdFormat:
    """How one entity's ids look: 13-digit numbers, short numbers, PREFIX-digits, prefix_ + base62, hex, codes."""

    kind: str  # digits | prefixed_digits | prefixed62 | hex | code
    length: int
    prefix: str = ""

    def pattern(self) -> str:
        """A regex every id of this format matches (anchored)."""
        body = {"digits": rf"\d{{{self.length}}}", "prefixed_digits": rf"\d{{{self.length}}}",
                "prefixed62": rf"[A-Za-z0-9]{{{self.length}}}", "hex": rf"[0-9a-f]{{{self.length}}}",
                "code": rf"[A-Z0-9]{{{self.length}}}"}[self.kind]
        return f"^{re.escape(self.prefix)}{body}$"

    def make(self, rng: random.Random) -> str:
        """A fresh random id."""
        return self.prefix + _body(self.kind, self.length, rng.getrandbits(128))

    def derive(self, text: str) -> str:
        """A random-looking id fixed by `text`: the id a create gives is the same for the same state."""
        number = int.from_bytes(hashlib.sha256(text.encode()).digest(), "big")
        return self.prefix + _body(self.kind, self.length, number)


def _body(kind: str, length: int, number: int) -> str:
    if kind in ("digits", "prefixed_digits"):
        number, lead = divmod(number, 9)
        rest = []
        for _ in range(length - 1):
            number, digit = divmod(number, 10)
            rest.append(str(digit))
        return str(lead % 9 + 1) + "".join(rest)
    alphabet = {"prefixed62": BASE62, "hex": HEX, "code": UPPER + chars.digits}[kind]
    out = []
    for _ in range(length):
        number, digit = divmod(number, len(alphabet))
        out.append(alphabet[digit])
        if number == 0:
            number = int.from_bytes(hashlib.sha256("".join(out).encode()).digest(), "big")
    return "".join(out)


def id_format(rng: random.Random, entity_words: str) -> IdFormat:
    """An id format for an entity: numeric (13 digits or short), prefixed, base62, hex or a short code."""
    initials = "".join(w[0] for w in entity_words.split()).upper()
    short = (initials + entity_words.replace(" ", "")[1:3].upper())[:3]
    kind = rng.choices(["digits13", "digits", "prefixed_digits", "prefixed62", "hex", "code"],
                       weights=[3, 2, 3, 3, 2, 1])[0]
    if kind == "digits13":
        return IdFormat("digits", 13)
    if kind == "digits":
        return IdFormat("digits", rng.choice([4, 5, 6, 7]))
    if kind == "prefixed_digits":
        return IdFormat("prefixed_digits", rng.choice([4, 5, 6]), short + rng.choice(["-", "-", "_"]))
    if kind == "prefixed62":
        return IdFormat("prefixed62", rng.choice([8, 10, 12, 16]), short.lower()[:2] + "_")
    if kind == "hex":
        return IdFormat("hex", rng.choice([8, 12, 24]))
    return IdFormat("code", rng.choice([4, 5, 6]))


# --- values -------------------------------------------------------------------------------------------------


def person(rng: random.Random) -> str:
    return f"{rng.choice(names.FIRST_NAMES)} {rng.choice(names.LAST_NAMES)}"


def thing_label(rng: random.Random) -> str:
    """A plausible proper name for a thing: "Amber Ridge 4", "Moss Gate"."""
    label = f"{rng.choice(names.ADJECTIVES)} {rng.choice(names.NOUNS)}"
    return label + (f" {rng.randrange(2, 20)}" if rng.random() < 0.4 else "")


def email(rng: random.Random, host: str, who: str | None = None) -> str:
    base = (who or person(rng)).lower()
    first, _, last = base.partition(" ")
    local = rng.choice([f"{first}.{last}", f"{first[0]}{last}", f"{first}{rng.randrange(10, 99)}"])
    ascii_local = re.sub(r"[^a-z0-9.]", "", local.encode("ascii", "ignore").decode()) or "user"
    return f"{ascii_local}@{host}"


def phone(rng: random.Random) -> str:
    return f"+{rng.choice([1, 31, 44, 49, 351, 372])}-{rng.randrange(200, 999)}-{rng.randrange(1000, 9999)}"


def formatted(kind: str, rng: random.Random) -> str:
    """A value of one of names.CODE_FIELDS' formats."""
    if kind == "sku":
        return "".join(rng.choice(UPPER) for _ in range(3)) + f"-{rng.randrange(10_000, 99_999)}"
    if kind == "lot":
        return f"L{rng.randrange(20, 27)}-{rng.randrange(1000, 9999)}"
    if kind == "serial":
        return "SN" + "".join(rng.choice(UPPER + chars.digits) for _ in range(8))
    if kind == "plate":
        return f"{rng.randrange(1, 9)}{''.join(rng.choice(UPPER) for _ in range(3))}{rng.randrange(100, 999)}"
    if kind == "barcode":
        return "".join(str(rng.randrange(10)) for _ in range(12))
    if kind == "postcode":
        return f"{rng.randrange(10_000, 99_999)}"
    if kind == "shelf":
        return f"{rng.choice('ABCDEFGH')}{rng.randrange(10, 99)}-{rng.randrange(1, 7)}"
    if kind == "street":
        return f"{rng.randrange(1, 240)} {rng.choice(names.STREETS)}"
    if kind == "city":
        return rng.choice(names.CITIES)
    if kind == "building":
        return rng.choice(names.BUILDINGS)
    if kind == "room":
        return f"{rng.choice('ABCDE')}{rng.randrange(100, 420)}"
    if kind == "person":
        return person(rng)
    if kind == "phone":
        return phone(rng)
    raise ValueError(kind)


def stamp(moment: dt.datetime) -> str:
    return moment.strftime(STAMP)


def parse_stamp(text: str) -> dt.datetime | None:
    """An RFC 3339 UTC timestamp as a datetime, or None when `text` is not one."""
    if not isinstance(text, str) or not re.fullmatch(RFC3339_PATTERN, text):
        return None
    try:
        return dt.datetime.strptime(text, STAMP).replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def random_now(rng: random.Random) -> dt.datetime:
    """The state's clock: a minute in 2024-2026."""
    return dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=rng.randrange(3 * 365 * 24 * 60))


def period_text(seconds: int) -> str:
    """A period in words: 5400 -> "90 minutes", 259200 -> "3 days"."""
    if seconds % 86_400 == 0:
        days = seconds // 86_400
        return f"{days} day{'s' * (days != 1)}"
    if seconds % 3600 == 0:
        hours = seconds // 3600
        return f"{hours} hour{'s' * (hours != 1)}"
    return f"{seconds // 60} minutes"
