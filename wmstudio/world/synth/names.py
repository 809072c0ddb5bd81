"""The words synthetic worlds are made of: domains, entity nouns, field names, lifecycles, verbs, people and places.

None of the five demo worlds' nouns (order, booking, flight, account, charge, refund) appears here, so a model trained
on synthetic worlds cannot lean on them; each world draws its own case style (snake or camel) for every key."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Theme:
    """A domain a world's API serves: who uses it (`actor`) and the things it manages (`resources`), as words."""

    domain: str  # "a community seed library"
    host: str  # "seedlib.example"
    actor: tuple[str, str]  # (singular, plural)
    resources: tuple[tuple[str, str], ...]


THEMES = (
    Theme("a community seed library", "seedlib.example", ("member", "members"),
          (("seed packet", "seed packets"), ("garden plot", "garden plots"), ("workshop", "workshops"))),
    Theme("a network of parcel lockers", "lockbox.example", ("recipient", "recipients"),
          (("parcel", "parcels"), ("locker", "lockers"), ("pickup slot", "pickup slots"))),
    Theme("a city permit office", "permits.example", ("applicant", "applicants"),
          (("permit", "permits"), ("inspection", "inspections"), ("site", "sites"))),
    Theme("a coworking space", "deskhub.example", ("tenant", "tenants"),
          (("desk", "desks"), ("meeting room", "meeting rooms"), ("visitor pass", "visitor passes"))),
    Theme("a bike-share scheme", "pedalnet.example", ("rider", "riders"),
          (("bike", "bikes"), ("dock station", "dock stations"), ("trip", "trips"))),
    Theme("a veterinary clinic", "pawcare.example", ("guardian", "guardians"),
          (("pet", "pets"), ("appointment", "appointments"), ("vaccine lot", "vaccine lots"))),
    Theme("a makerspace", "makerhall.example", ("maker", "makers"),
          (("tool kit", "tool kits"), ("workbench", "workbenches"), ("material roll", "material rolls"))),
    Theme("a museum archive", "archive.example", ("researcher", "researchers"),
          (("artifact", "artifacts"), ("loan request", "loan requests"), ("exhibit", "exhibits"))),
    Theme("a fleet maintenance depot", "fleetdepot.example", ("driver", "drivers"),
          (("vehicle", "vehicles"), ("work ticket", "work tickets"), ("spare part", "spare parts"))),
    Theme("a wine cellar service", "cellar.example", ("collector", "collectors"),
          (("bottle lot", "bottle lots"), ("tasting", "tastings"), ("storage rack", "storage racks"))),
    Theme("a research lab", "labnotes.example", ("scientist", "scientists"),
          (("sample", "samples"), ("assay", "assays"), ("freezer box", "freezer boxes"))),
    Theme("a lakeside campground", "pinecamp.example", ("guest", "guests"),
          (("campsite", "campsites"), ("kayak", "kayaks"), ("firewood bundle", "firewood bundles"))),
    Theme("a food bank", "foodshare.example", ("volunteer", "volunteers"),
          (("donation", "donations"), ("pantry shelf", "pantry shelves"), ("delivery run", "delivery runs"))),
    Theme("a music school", "notehouse.example", ("student", "students"),
          (("lesson", "lessons"), ("practice room", "practice rooms"), ("instrument", "instruments"))),
    Theme("a commercial greenhouse", "greenrow.example", ("grower", "growers"),
          (("tray", "trays"), ("harvest", "harvests"), ("nutrient batch", "nutrient batches"))),
    Theme("a container port", "portcall.example", ("agent", "agents"),
          (("container", "containers"), ("berth", "berths"), ("customs hold", "customs holds"))),
    Theme("a live-music venue", "stagedoor.example", ("promoter", "promoters"),
          (("gig", "gigs"), ("stage", "stages"), ("ticket batch", "ticket batches"))),
    Theme("an IT operations team", "opsdesk.example", ("engineer", "engineers"),
          (("incident", "incidents"), ("runbook", "runbooks"), ("deployment", "deployments"))),
    Theme("a print shop", "inkworks.example", ("client", "clients"),
          (("print job", "print jobs"), ("paper stock", "paper stocks"), ("proof", "proofs"))),
    Theme("a language school", "lingua.example", ("learner", "learners"),
          (("course", "courses"), ("placement test", "placement tests"), ("voucher", "vouchers"))),
    Theme("a dog kennel", "barkinn.example", ("keeper", "keepers"),
          (("kennel", "kennels"), ("stay", "stays"), ("grooming slot", "grooming slots"))),
    Theme("an observatory", "skyward.example", ("astronomer", "astronomers"),
          (("telescope slot", "telescope slots"), ("observation", "observations"), ("dataset", "datasets"))),
    Theme("a community solar cooperative", "sunshare.example", ("subscriber", "subscribers"),
          (("panel share", "panel shares"), ("meter reading", "meter readings"), ("credit note", "credit notes"))),
    Theme("a ski rental shop", "snowgear.example", ("skier", "skiers"),
          (("ski set", "ski sets"), ("boot locker", "boot lockers"), ("lift pass", "lift passes"))),
    Theme("a craft brewery", "hopline.example", ("taproom lead", "taproom leads"),
          (("keg", "kegs"), ("brew batch", "brew batches"), ("tap line", "tap lines"))),
    Theme("a tennis club", "baseline.example", ("player", "players"),
          (("court", "courts"), ("ladder match", "ladder matches"), ("ball machine", "ball machines"))),
    Theme("a translation agency", "wordbridge.example", ("translator", "translators"),
          (("translation job", "translation jobs"), ("glossary", "glossaries"), ("invoice", "invoices"))),
    Theme("a mountain hut network", "hutline.example", ("hiker", "hikers"),
          (("bunk", "bunks"), ("hut", "huts"), ("trail permit", "trail permits"))),
    Theme("an insurance claims desk", "claimdesk.example", ("policyholder", "policyholders"),
          (("claim", "claims"), ("adjuster visit", "adjuster visits"), ("policy", "policies"))),
    Theme("a data-labelling team", "labelops.example", ("annotator", "annotators"),
          (("task batch", "task batches"), ("label set", "label sets"), ("review", "reviews"))),
    Theme("a coral farm", "reefworks.example", ("aquarist", "aquarists"),
          (("coral frag", "coral frags"), ("tank", "tanks"), ("water test", "water tests"))),
    Theme("a film archive", "reelvault.example", ("archivist", "archivists"),
          (("reel", "reels"), ("scan job", "scan jobs"), ("licence", "licences"))),
    Theme("a drone survey company", "skymap.example", ("pilot", "pilots"),
          (("mission", "missions"), ("drone", "drones"), ("survey area", "survey areas"))),
    Theme("a pottery studio", "kilnroom.example", ("potter", "potters"),
          (("kiln firing", "kiln firings"), ("clay lot", "clay lots"), ("shelf", "shelves"))),
    Theme("a hackathon", "hackweek.example", ("team", "teams"),
          (("submission", "submissions"), ("mentor slot", "mentor slots"), ("prize", "prizes"))),
    Theme("a school library", "bookshelf.example", ("borrower", "borrowers"),
          (("volume", "volumes"), ("reading list", "reading lists"), ("study carrel", "study carrels"))),
    Theme("a blood donation service", "donorlink.example", ("donor", "donors"),
          (("donation slot", "donation slots"), ("blood unit", "blood units"), ("mobile clinic", "mobile clinics"))),
    Theme("a community radio station", "airwaves.example", ("presenter", "presenters"),
          (("broadcast slot", "broadcast slots"), ("playlist", "playlists"), ("jingle", "jingles"))),
    Theme("a chess league", "rookrow.example", ("member player", "member players"),
          (("fixture", "fixtures"), ("board", "boards"), ("rating adjustment", "rating adjustments"))),
    Theme("a seed bank for crop research", "germplasm.example", ("curator", "curators"),
          (("accession", "accessions"), ("germination test", "germination tests"), ("vault shelf", "vault shelves"))),
    Theme("a home care agency", "carecircle.example", ("caregiver", "caregivers"),
          (("visit", "visits"), ("care plan", "care plans"), ("medication round", "medication rounds"))),
    Theme("a sailing school", "tackhouse.example", ("sailor", "sailors"),
          (("dinghy", "dinghies"), ("mooring", "moorings"), ("race entry", "race entries"))),
    Theme("a cargo bike courier", "cargoloop.example", ("courier", "couriers"),
          (("consignment", "consignments"), ("route sheet", "route sheets"), ("charging bay", "charging bays"))),
    Theme("a stained-glass workshop", "leadlight.example", ("glazier", "glaziers"),
          (("panel commission", "panel commissions"), ("glass sheet", "glass sheets"), ("kiln slot", "kiln slots"))),
)

# (statuses in order, verb that moves a record *into* each later status)
LIFECYCLES = (
    (("draft", "submitted", "approved", "archived"), ("submit", "approve", "archive")),
    (("open", "in_progress", "resolved", "closed"), ("start", "resolve", "close")),
    (("pending", "active", "suspended", "retired"), ("activate", "suspend", "retire")),
    (("queued", "running", "done", "aborted"), ("launch", "finish", "abort")),
    (("requested", "confirmed", "fulfilled", "voided"), ("confirm", "fulfil", "void")),
    (("available", "reserved", "checked_out", "returned"), ("reserve", "check_out", "return")),
    (("new", "verified", "dispatched", "delivered"), ("verify", "dispatch", "deliver")),
    (("scheduled", "underway", "completed", "cancelled"), ("begin", "complete", "cancel")),
    (("listed", "held", "sold", "withdrawn"), ("hold", "sell", "withdraw")),
    (("idle", "assigned", "in_service", "decommissioned"), ("assign", "service", "decommission")),
    (("proposed", "accepted", "in_review", "published"), ("accept", "review", "publish")),
)

ENUM_FIELDS = (
    ("priority", ("low", "normal", "high", "urgent")), ("size", ("small", "medium", "large")),
    ("tier", ("bronze", "silver", "gold")), ("region", ("north", "south", "east", "west")),
    ("channel", ("web", "phone", "walk_in")), ("grade", ("A", "B", "C")), ("zone", ("Z1", "Z2", "Z3", "Z4")),
    ("language", ("en", "fr", "de", "es", "pt")), ("visibility", ("private", "team", "public")),
    ("colour", ("red", "green", "blue", "amber", "slate")), ("shift", ("morning", "afternoon", "night")),
    ("material", ("steel", "oak", "resin", "glass")), ("risk level", ("minor", "moderate", "severe")),
)
BOOL_FIELDS = ("fragile", "verified", "insured", "returnable", "auto renew", "requires escort", "flagged",
               "climate controlled", "wheelchair access", "sealed", "pinned", "oversized")
INT_FIELDS = (("weight grams", 50, 20_000), ("capacity", 1, 40), ("floor", 0, 12), ("duration minutes", 15, 240),
              ("rank", 1, 10), ("pages", 1, 400), ("age months", 1, 180), ("reading kwh", 0, 5_000),
              ("visits", 0, 90), ("length cm", 10, 900), ("batch number", 1, 999), ("seat count", 1, 60))
MONEY_FIELDS = ("deposit", "fee", "value", "budget", "late fee", "insured value")
TIME_FIELDS = ("created at", "updated at", "last seen at", "opened at", "registered at", "checked at")
QUANTITY_FIELDS = ("stock", "units available", "quantity on hand", "slots free", "credits", "seats left",
                   "remaining uses", "allowance", "capacity left", "doses left")
PRICE_FIELDS = ("unit price", "rate", "price", "cost", "fee per unit", "tariff")
LABEL_FIELDS = ("name", "title", "label", "display name", "nickname")
TAGS = ("urgent", "vip", "follow-up", "seasonal", "audit", "q3", "new", "overflow", "priority-lane", "legacy",
        "trial", "hold", "eco", "north-wing", "spare")

# formatted strings: (field words, regex the values match, example maker key)
CODE_FIELDS = (("sku", r"^[A-Z]{3}-\d{5}$", "sku"), ("lot code", r"^L\d{2}-\d{4}$", "lot"),
               ("serial", r"^SN[0-9A-Z]{8}$", "serial"), ("plate", r"^\d[A-Z]{3}\d{3}$", "plate"),
               ("barcode", r"^\d{12}$", "barcode"), ("postcode", r"^\d{5}$", "postcode"),
               ("shelf code", r"^[A-H]\d{2}-[1-6]$", "shelf"))
CONTACT_FIELDS = (("contact email", "email"), ("email", "email"), ("phone", "phone"), ("contact phone", "phone"))

NESTED_OBJECTS = (
    ("address", (("street", "street"), ("city", "city"), ("postcode", "postcode"))),
    ("dimensions", (("width mm", "int"), ("height mm", "int"), ("depth mm", "int"))),
    ("location", (("building", "building"), ("floor", "int"), ("room", "room"))),
    ("contact", (("name", "person"), ("phone", "phone"))),
)
MAP_FIELDS = (("allocations", "zone"), ("counts by shelf", "shelf"), ("quota by region", "region"))

FIRST_NAMES = ("Amara", "Bastian", "Chiara", "Dmitri", "Efua", "Farid", "Greta", "Hiroshi", "Ines", "Jamal", "Kalani",
               "Linnea", "Mateus", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tamsin", "Umar", "Valentina",
               "Wen", "Ximena", "Yusuf", "Zofia", "Anouk", "Bongani", "Catalina", "Desmond")
LAST_NAMES = ("Abara", "Bergström", "Castellano", "Dube", "Eriksen", "Fontaine", "Gallagher", "Haddad", "Iwasaki",
              "Jovanovic", "Kowalczyk", "Lindqvist", "Mensah", "Novak", "Okafor", "Petrov", "Quispe", "Rahman",
              "Santos", "Takahashi", "Urquhart", "Varga", "Whitlock", "Xu", "Yilmaz", "Zapata")
ADJECTIVES = ("Amber", "Birch", "Cobalt", "Drift", "Ember", "Fern", "Granite", "Harbour", "Indigo", "Juniper",
              "Kestrel", "Lark", "Moss", "North", "Opal", "Pine", "Quartz", "River", "Saffron", "Tidal", "Umber", "Vale", "Willow")
NOUNS = ("Ridge", "Hollow", "Point", "Crest", "Bay", "Field", "Brook", "Gate", "Yard", "Row", "Court", "Loft", "Mill")
CITIES = ("Tallinn", "Porto", "Ljubljana", "Tromsø", "Valparaíso", "Kraków", "Ghent", "Bergen", "Oaxaca", "Leuven",
          "Malmö", "Graz", "Cusco", "Aarhus")
STREETS = ("Linden Way", "Quay Street", "Orchard Lane", "Mill Road", "Harbour Walk", "Beacon Hill", "Station Row")
BUILDINGS = ("North Hall", "Annex B", "Main House", "Block C", "East Wing", "Depot 2")

# error words by kind; `{E}`: the entity's word in capitals, `{Q}`: the quantity's, `{A}`: the actor's
NOT_FOUND_CODES = ("{E}_NOT_FOUND", "UNKNOWN_{E}", "NO_SUCH_{E}", "{E}_MISSING", "RESOURCE_NOT_FOUND", "NOT_FOUND")
STATUS_CODES = ("{E}_NOT_{S}", "INVALID_STATE", "{E}_STATE_CONFLICT", "WRONG_STATUS", "ILLEGAL_TRANSITION",
                "{E}_LOCKED")
QUANTITY_CODES = ("INSUFFICIENT_{Q}", "{Q}_EXCEEDED", "NOT_ENOUGH_{Q}", "OVER_LIMIT", "{Q}_TOO_LOW")
WINDOW_CODES = ("OUTSIDE_WINDOW", "DATE_OUT_OF_RANGE", "TOO_EARLY_OR_LATE", "SCHEDULE_CONFLICT", "INVALID_WINDOW")
OWNER_CODES = ("NOT_OWNER", "FORBIDDEN", "{E}_BELONGS_TO_ANOTHER_{A}", "OWNERSHIP_MISMATCH", "PERMISSION_DENIED")
DUPLICATE_CODES = ("DUPLICATE_{E}", "{E}_EXISTS", "ALREADY_EXISTS", "NAME_TAKEN")
LOCKED_CODES = ("{E}_READ_ONLY", "{E}_FROZEN", "EDIT_NOT_ALLOWED", "IMMUTABLE_{E}")
DELETE_CODES = ("{E}_IN_USE", "CANNOT_DELETE", "DELETE_BLOCKED", "{E}_NOT_DELETABLE")
EMPTY_UPDATE_CODES = ("NOTHING_TO_UPDATE", "EMPTY_PATCH", "NO_CHANGES")
SAME_CODES = ("SAME_{E}", "SOURCE_EQUALS_TARGET", "SELF_TRANSFER")
BATCH_NONE_CODES = ("NOTHING_PROCESSED", "ALL_FAILED", "BATCH_REJECTED")
TOKEN_CODES = ("INVALID_PAGE_TOKEN", "BAD_CURSOR", "CURSOR_INVALID", "STALE_PAGE_TOKEN")
TIME_FORMAT_CODES = ("INVALID_TIMESTAMP", "BAD_DATE", "MALFORMED_TIME")
CREDENTIAL_CODES = ("INVALID_CREDENTIALS", "LOGIN_FAILED", "BAD_PASSWORD", "AUTHENTICATION_FAILED")
EXPIRED_CODES = ("TOKEN_EXPIRED", "SESSION_EXPIRED", "AUTH_EXPIRED")
BAD_TOKEN_CODES = ("INVALID_TOKEN", "UNKNOWN_SESSION", "TOKEN_REVOKED")
NO_AUTH_CODES = ("UNAUTHENTICATED", "AUTH_REQUIRED", "LOGIN_REQUIRED", "NOT_SIGNED_IN")
MISSING_CODES = ("MISSING_ARGUMENT", "MISSING_PARAMETER", "MISSING_FIELD", "REQUIRED_FIELD_MISSING")
INVALID_CODES = ("INVALID_ARGUMENT", "VALIDATION_ERROR", "BAD_REQUEST", "INVALID_REQUEST")
UNKNOWN_TOOL_CODES = ("UNKNOWN_OPERATION", "NO_SUCH_METHOD", "UNSUPPORTED_ACTION", "UNKNOWN_TOOL")
RATE_CODES = ("RATE_LIMITED", "TOO_MANY_REQUESTS", "THROTTLED", "QUOTA_EXCEEDED")
TRANSIENT_CODES = ("{D}_UNAVAILABLE", "UPSTREAM_TIMEOUT", "INTERNAL", "BACKEND_ERROR", "STORAGE_BUSY",
                   "DEPENDENCY_FAILED", "TRY_AGAIN_LATER", "{D}_DEGRADED", "GATEWAY_TIMEOUT")

# tool verbs by family (the entity's words follow; `s` marks the plural)
GET_VERBS = ("get", "fetch", "read", "lookup", "show", "describe", "retrieve")
SEARCH_VERBS = ("list s", "search s", "find s", "query s", "browse s")
CREATE_VERBS = ("create", "add", "register", "new", "open")
UPDATE_VERBS = ("update", "edit", "modify", "patch", "amend")
DELETE_VERBS = ("delete", "remove", "discard", "drop")
BATCH_VERBS = ("bulk set", "batch set", "mass update", "bulk tag")
TRANSFER_VERBS = ("transfer", "move", "shift", "reallocate")
LOGIN_NAMES = ("login", "sign in", "authenticate", "start session", "create session")
SESSION_PARAMS = ("session token", "access token", "auth token", "session id")
USER_PARAMS = ("email", "username", "login")
SECRET_PARAMS = ("password", "passphrase", "secret")

ITEMS_KEYS = ("items", "results", "data", "entries", "records")
MORE_KEYS = ("has more", "more", "has next")
NEXT_KEYS = ("next page token", "next cursor", "next token")
LIMIT_PARAMS = ("limit", "page size", "max results")
TOKEN_PARAMS = ("page token", "cursor", "page cursor")
TOTAL_KEYS = ("total", "total count", "match count")
COUNT_KEYS = ("updated", "processed", "succeeded", "applied count")
FAILED_KEYS = ("failed ids", "rejected ids", "skipped ids")
