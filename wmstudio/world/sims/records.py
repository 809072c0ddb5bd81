"""Paginated record search over a CRM: filters before pagination, exact totals, stable pages, page tokens.

Annotators named pagination drift as a recurring world-model failure, so this world makes every page
checkable: the same query and page always give the same records, in id order, and the last page says so."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re

from wmstudio.world.rules.cel import Rule
from wmstudio.world.sims.base import (
    ERROR,
    JSON,
    OK,
    PARTIAL,
    Reply,
    Simulator,
    array,
    boolean,
    fail,
    integer,
    make_tool,
    params,
    record,
    response_schema,
    string,
)
from wmstudio.world.sims.preconditions import argument_rules, precondition
from wmstudio.world.spec import Call
from wmstudio.world.steering.directives import Steering
from wmstudio.world.tools import Tool

DEFAULT_PAGE_SIZE = 5
MAX_PAGE_SIZE = 10
MAX_TAG_IDS = 10
PLANS = ["free", "pro", "enterprise"]
ACCOUNT_STATUSES = ["active", "trial", "churned"]
CITIES = ["Denver", "Austin", "Portland", "Chicago", "Boston", "Atlanta"]
FILTERS = ("city", "plan", "account_status", "name_contains")
TAG_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
FIRST = ["Larkspur", "Northwind", "Bluefin", "Cedar", "Harbor", "Summit", "Copper", "Juniper", "Aspen", "Redwood",
         "Maple", "Granite", "Lumen", "Orchid", "Falcon", "Willow", "Beacon", "Sterling"]
SECOND = ["Dental", "Logistics", "Bakery", "Analytics", "Legal", "Fitness", "Clinic", "Studio", "Robotics",
          "Coffee", "Realty", "Labs"]
TAGS = ["vip", "renewal-q3", "at-risk", "upsell", "needs-onboarding", "beta"]
MATCHES_FILTERS = (
    '(!has(call.arguments.city) || r.city == call.arguments.city) && '
    '(!has(call.arguments.plan) || r.plan == call.arguments.plan) && '
    '(!has(call.arguments.account_status) || r.account_status == call.arguments.account_status)'
)


class RecordsSimulator(Simulator):
    """A CRM's account API: filtered, paginated search, one-record lookup and bulk tagging."""

    name = "records"
    description = "A CRM of customer accounts with filtered, paginated search and bulk tagging."
    task = (
        "You are a sales-operations assistant. Find customer accounts matching what the user asks for, page "
        "through results completely, and tag accounts for follow-up."
    )

    def tools(self) -> list[Tool]:
        plan, account_status = string(enum=[""] + PLANS), string(enum=[""] + ACCOUNT_STATUSES)
        return [
            make_tool(
                "search_records",
                f"Search accounts in id order; filters apply before paging ({DEFAULT_PAGE_SIZE} per page by default). "
                "Give page or the previous response's next_page_token.",
                params({"city": string("Exact city"), "plan": string(enum=PLANS),
                        "account_status": string(enum=ACCOUNT_STATUSES),
                        "name_contains": string("Case-insensitive part of the name"),
                        "page_size": integer("Records per page", 1, MAX_PAGE_SIZE),
                        "page": integer("Page number, from 1", 1),
                        "page_token": string("next_page_token from the previous page of the same search")}),
                response_schema({
                    "records": array(record({"id": string(), "name": string(), "city": string(), "plan": plan,
                                             "account_status": account_status})),
                    "total": integer("Matching records over all pages", 0), "page": integer(minimum=0),
                    "last_page": boolean(), "next_page_token": string('"" on the last page'),
                }),
            ),
            make_tool(
                "get_record", "Look up one account with its seats and tags.",
                params({"id": string("Account id, e.g. ACC-1007")}, ["id"]),
                response_schema({
                    "id": string(), "name": string(), "city": string(), "plan": plan, "account_status": account_status,
                    "seats": integer(minimum=0), "tags": array(string()),
                }),
            ),
            make_tool(
                "tag_records", f"Add a tag to up to {MAX_TAG_IDS} accounts; unknown or locked ids are reported back.",
                params({"ids": {**array(string(), "Account ids", MAX_TAG_IDS), "minItems": 1},
                        "tag": string("Tag: lowercase letters, digits and -, e.g. renewal-q3")}, ["ids", "tag"]),
                response_schema({"tag": string(), "updated": integer("Accounts tagged", 0),
                                 "failed_ids": array(string())}, statuses=(OK, PARTIAL, ERROR)),
            ),
        ]

    def rules(self) -> list[Rule]:
        return [
            Rule("Every record listed matches the search filters",
                 'call.name != "search_records" || response.status == "error" ? true : '
                 f'response.records.all(r, {MATCHES_FILTERS})'),
            Rule("The total counts exactly the matching accounts (or is 0 when nothing is returned)",
                 'call.name != "search_records" || response.status == "error" || response.total == 0 || '
                 'has(call.arguments.name_contains) ? true : '
                 f'response.total == size(state.records.filter(r, {MATCHES_FILTERS}))'),
            Rule("Only the last page has no next_page_token, and no page lists more records than the total",
                 'call.name != "search_records" || response.status == "error" || (response.last_page == '
                 '(response.next_page_token == "") && size(response.records) <= response.total && response.page >= 1)'),
            Rule("A bulk tag accounts for every id: tagged or reported failed, partial exactly when some failed",
                 'call.name != "tag_records" ? true : (response.status == "error" ? response.updated == 0 : '
                 'response.updated + size(response.failed_ids) == size(call.arguments.ids) && '
                 '(response.status == "partial") == (size(response.failed_ids) > 0))'),
            Rule("Account details never change except their tags",
                 'call.name != "get_record" || response.status == "error" ? true : state.records.filter(s, '
                 's.id == response.id).all(s, s.name == response.name && s.city == response.city && '
                 's.plan == response.plan && s.seats == response.seats)'),
            precondition("INVALID_PAGE_TOKEN", "INVALID_PAGE_TOKEN: token from another search",
                         ["search_records"], "has(call.arguments.page_token)"),
            precondition("NOT_FOUND", "NOT_FOUND: unknown id (tag_records: all unknown)",
                         ["get_record", "tag_records"],
                         '!state.records.exists(r, call.name == "get_record" ? r.id == call.arguments.id : '
                         'r.id in call.arguments.ids)', steered_by="empty_result"),
            precondition("INVALID_TAG", "INVALID_TAG: not lowercase letters, digits, -", ["tag_records"],
                         f'!call.arguments.tag.matches("{TAG_PATTERN.pattern}")'),
            *argument_rules(self.tools(), {"search_records": "has(call.arguments.page) && "
                                                             "has(call.arguments.page_token)"}),
        ]

    def initial_state(self, rng: random.Random) -> JSON:
        names = rng.sample([f"{a} {b}" for a in FIRST for b in SECOND], rng.randrange(11, 17))
        ids = sorted(rng.sample(range(1000, 1999), len(names)))
        records = []
        for number, name in zip(ids, names):
            plan = rng.choices(PLANS, weights=[3, 4, 2])[0]
            records.append({
                "id": f"ACC-{number}", "name": name, "city": rng.choice(CITIES[:4]) if rng.random() < 0.8 else rng.choice(CITIES),
                "plan": plan, "account_status": rng.choices(ACCOUNT_STATUSES, weights=[6, 2, 2])[0],
                "seats": {"free": 1, "pro": rng.randrange(2, 25), "enterprise": rng.randrange(25, 400)}[plan],
                "tags": rng.sample(TAGS, rng.choice([0, 0, 1])),
            })
        return {"records": records}

    # --- tools ---------------------------------------------------------------------------------------------

    def lookup(self, state: JSON, tool: str, args: JSON) -> JSON | None:
        if tool != "search_records":
            return None
        size = args.get("page_size", DEFAULT_PAGE_SIZE)
        offset = (args.get("page", 1) - 1) * size
        if "page_token" in args:
            offset = _read_token(args["page_token"], _fingerprint(args))
            if offset is None:
                return {"page_token": "does not decode for this search"}
        matching = _records_matching(state, args)
        return {"records_matching": len(matching), "offset": offset, "records_on_page": matching[offset: offset + size]}

    def do_search_records(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        if "page" in args and "page_token" in args:
            return fail("INVALID_ARGUMENT", "Give page or page_token, not both.")
        size = steer.page_size or args.get("page_size", DEFAULT_PAGE_SIZE)
        fingerprint = _fingerprint(args)
        offset = (args.get("page", 1) - 1) * size
        if "page_token" in args:
            offset = _read_token(args["page_token"], fingerprint)
            if offset is None:
                return fail("INVALID_PAGE_TOKEN", "The page token is malformed or belongs to a different search.")
        matching = _records_matching(state, args)
        if steer.empty_result:
            matching = []
        shown = matching[offset: offset + size]
        last = offset + size >= len(matching)
        rows = [{key: r[key] for key in ("id", "name", "city", "plan", "account_status")} for r in shown]
        return Reply({"records": rows, "total": len(matching), "page": offset // size + 1, "last_page": last,
                      "next_page_token": "" if last else _token(offset + size, fingerprint)},
                     message=f"Records {offset + 1}-{offset + len(rows)} of {len(matching)}." if rows
                     else f"No records on this page; {len(matching)} match in all.")

    def do_get_record(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        found = _record(state, args["id"])
        if found is None or steer.empty_result:
            return fail("NOT_FOUND", f"No account {args['id']}.", id=args["id"])
        return Reply({key: found[key] for key in ("id", "name", "city", "plan", "account_status", "seats", "tags")},
                     message=f"{found['name']} ({found['plan']}, {found['account_status']}).")

    def do_tag_records(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        tag, ids = args["tag"], args["ids"]
        if not TAG_PATTERN.match(tag):
            return fail("INVALID_TAG", f"Tag '{tag}' must be lowercase letters, digits and -, up to 32 characters.")
        known = [i for i in ids if _record(state, i) is not None]
        if not known:
            return fail("NOT_FOUND", "None of the given ids is an account.", tag=tag)
        locked: set[str] = set()
        if steer.partial_success and len(set(known)) >= 2:
            locked = set(sorted(set(known))[1::2])
        failed = [i for i in ids if i not in known or i in locked]
        for account_id in ids:
            if account_id not in failed and tag not in (row := _record(state, account_id))["tags"]:
                row["tags"].append(tag)
        status = PARTIAL if failed else OK
        message = f"Tagged {len(ids) - len(failed)} account(s) with '{tag}'."
        if locked:
            message += f" {len(locked)} account(s) are locked by another edit; retry them later."
        elif failed:
            message += f" Unknown ids: {', '.join(failed)}."
        return Reply({"tag": tag, "updated": len(ids) - len(failed), "failed_ids": failed}, message=message,
                     status=status)

    # --- scripted agent ------------------------------------------------------------------------------------

    def valid_call(self, state: JSON, rng: random.Random) -> Call:
        records = state["records"]
        roll = rng.random()
        if roll < 0.55:
            args: JSON = {}
            for key, values in (("city", CITIES[:4]), ("plan", PLANS), ("account_status", ACCOUNT_STATUSES)):
                if rng.random() < 0.35:
                    args[key] = rng.choice(values)
            if rng.random() < 0.1:
                args["name_contains"] = rng.choice(SECOND).lower()[:4]
            if rng.random() < 0.3:
                args["page_size"] = rng.choice([2, 3, 5, 10])
            if rng.random() < 0.35:
                args["page"] = rng.choice([1, 2, 2, 3])
            elif rng.random() < 0.3:  # continue a search from its first page's token
                first = {**args, "page": 1}
                _, response = self.step(state, Call("search_records", first))
                if response["next_page_token"]:
                    args["page_token"] = response["next_page_token"]
            return Call("search_records", args)
        if roll < 0.75:
            return Call("get_record", {"id": rng.choice(records)["id"]})
        chosen = [r["id"] for r in rng.sample(records, rng.randrange(1, 5))]
        return Call("tag_records", {"ids": chosen, "tag": rng.choice(TAGS)})

    def invalid_call(self, state: JSON, rng: random.Random) -> Call:
        unknown = f"ACC-{rng.randrange(2000, 2999)}"
        choice = rng.randrange(5)
        if choice == 0:
            return Call("get_record", {"id": rng.choice([unknown, unknown.lower(), "1042"])})
        if choice == 1:
            return Call("tag_records", {"ids": [unknown], "tag": rng.choice(TAGS)})
        if choice == 2:
            return Call("tag_records", {"ids": [rng.choice(state["records"])["id"]], "tag": rng.choice(["VIP!", "follow up"])})
        if choice == 3:  # a token from another search, or garbage
            other = _token(5, _fingerprint({"plan": "free"}))
            return Call("search_records", {"plan": "pro", "page_token": rng.choice([other, "abc123", "page2"])})
        return Call("search_records", rng.choice([{"page": 2, "page_token": _token(5, _fingerprint({}))},
                                                  {"page_size": 50}, {"plan": "premium"}]))


def _record(state: JSON, record_id: str) -> JSON | None:
    return next((r for r in state["records"] if r["id"] == record_id), None)


def _fingerprint(args: JSON) -> str:
    query = {key: args[key].lower() if key == "name_contains" else args[key] for key in FILTERS if key in args}
    return hashlib.sha256(json.dumps(query, sort_keys=True).encode()).hexdigest()[:8]


def _token(offset: int, fingerprint: str) -> str:
    return base64.urlsafe_b64encode(f"{offset}:{fingerprint}".encode()).decode().rstrip("=")


def _read_token(token: str, fingerprint: str) -> int | None:
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        offset, owner = text.split(":")
    except (ValueError, UnicodeDecodeError):
        return None
    return int(offset) if offset.isdigit() and owner == fingerprint else None


def _records_matching(state: JSON, args: JSON) -> list[JSON]:
    """The accounts a search with these filters pages through, in id order."""
    needle = args.get("name_contains", "").lower()
    return [r for r in state["records"]
            if all(args.get(key) in (None, r[key]) for key in ("city", "plan", "account_status"))
            and needle in r["name"].lower()]
