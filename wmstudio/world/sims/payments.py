"""A payments API behind a login: session tokens, API keys, charges and refunds, with real auth errors.

Annotators flagged unrealistic API-key formats and error cascades; here tokens and keys have one fixed,
realistic shape, and only calls without a valid session fail, never the calls after an error."""

from __future__ import annotations

import datetime as dt
import hashlib
import random
import string as text_chars

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
    money,
    params,
    record,
    response_schema,
    string,
)
from wmstudio.world.sims.preconditions import argument_rules, precondition
from wmstudio.world.spec import Call
from wmstudio.world.steering.directives import Steering
from wmstudio.world.tools import Tool

SESSION_PREFIX, SESSION_CHARS = "plsess_", 32
API_KEY_PREFIX, API_KEY_CHARS = "pl_live_", 32
ID_CHARS, KEY_ID_CHARS = 14, 12  # charge and refund ids: ch_ / re_ + 14 letters/digits; key ids: key_ + 12
RFC3339_UTC = r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\dZ"
SESSION_HOURS = 1
MIN_CHARGE_CENTS = 50
DEFAULT_PAGE_SIZE = 5
CURRENCIES = ["usd", "eur", "gbp"]
BASE62 = text_chars.digits + text_chars.ascii_letters
BUSINESSES = [("Brightleaf Tea Co.", "brightleaf"), ("Harbor Bikes", "harborbikes"), ("Nimbus Yoga", "nimbusyoga"),
              ("Quarry Print Shop", "quarryprint"), ("Saltmarsh Books", "saltmarsh")]
CUSTOMER_NAMES = ["Olivia Chen", "Mateo Rossi", "Aisha Bello", "Jonas Berg", "Sofia Alvarez", "Liam O'Brien",
                  "Hana Sato", "Noah Fischer"]
CARDS = ["visa 4242", "mastercard 4444", "amex 0005", "visa 1881", "mastercard 5100"]
SESSION_PARAM = {"session_token": string(f"Session token from login ({SESSION_PREFIX}...)")}


class PaymentsSimulator(Simulator):
    """A merchant's payments API: log in, check the balance, charge customers, refund charges, manage API keys."""

    name = "payments"
    description = "A payments API with login, expiring session tokens, API keys, charges and refunds."
    task = (
        "You are the finance assistant of a small online business. Log in with the credentials in the "
        "environment state (`login`), then charge customers, refund charges and manage API keys as asked."
    )

    def tools(self) -> list[Tool]:
        charge_id = string("Charge id, e.g. ch_3Kx9Pq2LmZ7wYt")
        customer_id = string("Customer id, e.g. cus_Q8rT2mLx9Ws1Bd")
        currency, cents = string(enum=[""] + CURRENCIES), integer(minimum=0)
        return [
            make_tool(
                "login", f"Log in; returns a session token valid for {SESSION_HOURS} hour.",
                params({"email": string(), "password": string()}, ["email", "password"]),
                response_schema({
                    "session_token": string(f'{SESSION_PREFIX} + {SESSION_CHARS} letters/digits; "" on failure',
                                            pattern=f"^({SESSION_PREFIX}[A-Za-z0-9]{{{SESSION_CHARS}}})?$"),
                    "expires_at": string('RFC 3339 UTC; "" on failure', pattern=f"^({RFC3339_UTC})?$"),
                    "account_id": string(),
                }),
            ),
            make_tool(
                "get_balance", "The merchant's balance: available now and pending settlement.",
                params(SESSION_PARAM, ["session_token"]),
                response_schema({"available_cents": cents, "pending_cents": cents, "currency": currency}),
            ),
            make_tool(
                "create_charge", "Charge a customer's card on file.",
                params({**SESSION_PARAM, "customer_id": customer_id,
                        "amount_cents": integer(f"Amount in cents, at least {MIN_CHARGE_CENTS}", 1),
                        "currency": string(enum=CURRENCIES), "description": string("Shown on the receipt")},
                       ["session_token", "customer_id", "amount_cents", "currency"]),
                response_schema({"charge_id": string('"" on failure', pattern=f"^(ch_[A-Za-z0-9]{{{ID_CHARS}}})?$"),
                                 "customer_id": string(),
                                 "amount_cents": cents, "currency": currency}),
            ),
            make_tool(
                "refund_charge", "Refund a charge, in full or in part (amount defaults to what is left).",
                params({**SESSION_PARAM, "charge_id": charge_id, "amount_cents": integer("Amount to refund", 1)},
                       ["session_token", "charge_id"]),
                response_schema({
                    "charge_id": string(),
                    "refund_id": string('"" if none', pattern=f"^(re_[A-Za-z0-9]{{{ID_CHARS}}})?$"), "refunded": boolean(),
                    "amount_refunded_cents": cents, "total_refunded_cents": integer("Refunded on the charge so far", 0),
                    "charge_amount_cents": cents,
                }, statuses=(OK, PARTIAL, ERROR)),
            ),
            make_tool(
                "list_charges", f"List charges, newest first ({DEFAULT_PAGE_SIZE} at most), optionally for one customer.",
                params({**SESSION_PARAM, "customer_id": customer_id}, ["session_token"]),
                response_schema({
                    "charges": array(record({"charge_id": string(), "amount_cents": cents, "currency": currency,
                                             "refunded_cents": cents})),
                    "total": integer("Matching charges in all", 0), "has_more": boolean(),
                }),
            ),
            make_tool(
                "create_api_key", "Create a live API key for a server integration; the full key is shown only once.",
                params({**SESSION_PARAM, "label": string("What the key is for")}, ["session_token", "label"]),
                response_schema({"key_id": string('"" on failure', pattern=f"^(key_[A-Za-z0-9]{{{KEY_ID_CHARS}}})?$"),
                                 "api_key": string(f'{API_KEY_PREFIX} + {API_KEY_CHARS} letters/digits; "" on failure',
                                                   pattern=f"^({API_KEY_PREFIX}[A-Za-z0-9]{{{API_KEY_CHARS}}})?$"),
                                 "label": string()}),
            ),
        ]

    def rules(self) -> list[Rule]:
        return [
            Rule("Every tool but login needs the session token of an earlier successful login in this episode",
                 'call.name == "login" || response.status == "error" ? true : has(call.arguments.session_token) && '
                 'history.filter(h, h.call.name == "login").exists(h, h.response.status == "ok" && '
                 'h.response.session_token == call.arguments.session_token)'),
            Rule(f"Session tokens are {SESSION_PREFIX} plus {SESSION_CHARS} letters and digits; API keys are "
                 f"{API_KEY_PREFIX} plus {API_KEY_CHARS}; failures return neither",
                 'call.name == "login" ? (response.status == "error" ? response.session_token == "" : '
                 f'response.session_token.matches("^{SESSION_PREFIX}[A-Za-z0-9]{{{SESSION_CHARS}}}$")) : '
                 'call.name != "create_api_key" || (response.status == "error" ? response.api_key == "" : '
                 f'response.api_key.matches("^{API_KEY_PREFIX}[A-Za-z0-9]{{{API_KEY_CHARS}}}$"))'),
            Rule(f"A session expires {SESSION_HOURS} hour after login",
                 'call.name != "login" || response.status == "error" || timestamp(response.expires_at) - '
                 f'timestamp(state.now) == duration("{SESSION_HOURS * 3600}s")'),
            Rule("A charge is for exactly the amount asked",
                 'call.name != "create_charge" || response.status == "error" || '
                 'response.amount_cents == call.arguments.amount_cents'),
            Rule("A refund never takes a charge's refunds above its amount; an error refunds nothing",
                 'call.name != "refund_charge" || (response.total_refunded_cents <= response.charge_amount_cents && '
                 '(response.status == "error" ? !response.refunded && response.amount_refunded_cents == 0 : '
                 'response.refunded && response.amount_refunded_cents > 0))'),
            Rule("A list never shows more charges than it counts",
                 'call.name != "list_charges" || (size(response.charges) <= response.total && '
                 'response.has_more == (size(response.charges) < response.total))'),
            *self.error_rules(),
        ]

    def error_rules(self) -> list[Rule]:
        """Each error code's cause (sims/preconditions.py). Logins, charges, refunds and keys made in earlier steps
        count as the state's: a refund's amount left is the charge's amount less what the state and the history
        refunded; the balance only falls by refunds, so a shortfall needs the initial balance short or a refund since."""
        others = [t.name for t in self.tools() if t.name != "login"]
        token = "call.arguments.session_token"
        charge = 'state.charges.filter(c, c.id == call.arguments.charge_id)'
        made = ('history.filter(h, h.call.name == "create_charge" && h.response.status != "error" && '
                'h.response.charge_id == call.arguments.charge_id)')
        refunds = ('history.filter(h, h.call.name == "refund_charge" && h.response.status != "error" && '
                   'h.response.charge_id == call.arguments.charge_id)')
        amount = "call.arguments.amount_cents"
        customer = "state.customers.filter(c, c.id == call.arguments.customer_id)"
        key_made = ('history.exists(h, h.call.name == "create_api_key" && h.response.status != "error" && '
                    'call.arguments.label.contains(h.response.label))')
        return [
            precondition("UNAUTHENTICATED", "UNAUTHENTICATED: no session token", others,
                         f'!has({token}) || type({token}) != string || {token} == ""'),
            precondition("INVALID_TOKEN", "INVALID_TOKEN: unknown token", others,
                         f'!state.sessions.exists(s, s.token == {token}) && !history.exists(h, h.call.name == "login" '
                         f'&& h.response.status == "ok" && h.response.session_token == {token})'),
            precondition("TOKEN_EXPIRED", "TOKEN_EXPIRED: session expired", others,
                         f"state.sessions.exists(s, s.token == {token} && s.expires_at <= state.now)",
                         steered_by="auth_failure"),
            precondition("INVALID_CREDENTIALS", "INVALID_CREDENTIALS: wrong email or password", ["login"],
                         "call.arguments.email != state.login.email || call.arguments.password != state.login.password",
                         steered_by="auth_failure"),
            precondition("CUSTOMER_NOT_FOUND", "CUSTOMER_NOT_FOUND: unknown customer", ["create_charge"],
                         "!state.customers.exists(c, c.id == call.arguments.customer_id)"),
            precondition("AMOUNT_TOO_SMALL", f"AMOUNT_TOO_SMALL: under {MIN_CHARGE_CENTS} cents", ["create_charge"],
                         f"{amount} < {MIN_CHARGE_CENTS}"),
            precondition("CARD_DECLINED", "CARD_DECLINED: card not ok", ["create_charge"],
                         f"{customer}.exists(c, !c.card_ok)"),
            precondition("CHARGE_NOT_FOUND", "CHARGE_NOT_FOUND: unknown charge", ["refund_charge"],
                         f"size({charge}) == 0 && size({made}) == 0"),
            precondition("CHARGE_ALREADY_REFUNDED", "CHARGE_ALREADY_REFUNDED: nothing left to refund",
                         ["refund_charge"],
                         f"{charge}.exists(c, c.refunded_cents == c.amount_cents) || {refunds}.exists(h, "
                         "h.response.total_refunded_cents == h.response.charge_amount_cents)"),
            precondition("AMOUNT_EXCEEDS_CHARGE", "AMOUNT_EXCEEDS_CHARGE: amount over what is left",
                         ["refund_charge"],
                         f"has({amount}) && ({charge}.exists(c, {amount} > c.amount_cents - c.refunded_cents) || "
                         f"{made}.exists(h, {amount} > h.response.amount_cents) || {refunds}.exists(h, {amount} > "
                         "h.response.charge_amount_cents - h.response.total_refunded_cents))"),
            precondition("INSUFFICIENT_BALANCE", "INSUFFICIENT_BALANCE: refund over available balance",
                         ["refund_charge"],
                         'history.exists(h, h.call.name == "refund_charge" && h.response.status != "error") || '
                         f"(has({amount}) ? {amount} > state.balance.available_cents : {charge}.exists(c, "
                         "c.amount_cents - c.refunded_cents > state.balance.available_cents) || "
                         f"{made}.exists(h, h.response.amount_cents > state.balance.available_cents))"),
            precondition("DUPLICATE_LABEL", "DUPLICATE_LABEL: label taken", ["create_api_key"],
                         f"state.api_keys.exists(k, call.arguments.label.contains(k.label)) || {key_made}"),
            *argument_rules(self.tools(), {"create_api_key": 'call.arguments.label.matches("^\\\\s*$")'}),
        ]

    def initial_state(self, rng: random.Random) -> JSON:
        business, handle = rng.choice(BUSINESSES)
        now = dt.datetime(2025, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=rng.randrange(365 * 24 * 60))
        customers = [{"id": "cus_" + _random62(rng, 14), "name": name, "card": card, "card_ok": True}
                     for name, card in zip(rng.sample(CUSTOMER_NAMES, 4), rng.sample(CARDS, 4))]
        rng.choice(customers[1:])["card_ok"] = False
        charges = []
        for _ in range(rng.randrange(3, 7)):
            amount = rng.randrange(8, 400) * 100 + rng.choice([0, 0, 50, 99])
            charges.append({"id": "ch_" + _random62(rng, ID_CHARS), "customer_id": rng.choice(customers)["id"],
                            "amount_cents": amount, "currency": "usd",
                            "refunded_cents": amount if rng.random() < 0.2 else 0})
        password = rng.choice(["Tea-Time-42!", "c0rrect-Horse", "Blue#Harbor7", "Quiet.River.9"])
        expired = now - dt.timedelta(minutes=rng.randrange(61, 600))
        return {
            "now": _stamp(now),
            "account": {"id": "acct_" + _random62(rng, 16), "business": business},
            "login": {"email": f"finance@{handle}.example", "password": password},
            "sessions": [{"token": SESSION_PREFIX + _random62(rng, SESSION_CHARS), "expires_at": _stamp(expired)}],
            "api_keys": [{"key_id": "key_" + _random62(rng, KEY_ID_CHARS), "label": "website", "prefix": API_KEY_PREFIX + _random62(rng, 4)}],
            "balance": {"available_cents": rng.randrange(500, 8000) * 100, "pending_cents": rng.randrange(0, 900) * 100,
                        "currency": "usd"},
            "customers": customers,
            "charges": charges,
            "refunds": [],
        }

    # --- auth ----------------------------------------------------------------------------------------------

    def check_auth(self, state: JSON, call: Call) -> Reply | None:
        if call.name == "login":
            return None
        token = call.arguments.get("session_token") if isinstance(call.arguments, dict) else None
        if not isinstance(token, str) or not token:
            return fail("UNAUTHENTICATED", "No session token: call login first.")
        session = next((s for s in state["sessions"] if s["token"] == token), None)
        if session is None:
            return fail("INVALID_TOKEN", "The session token is not recognised: log in again.")
        if session["expires_at"] <= state["now"]:
            return fail("TOKEN_EXPIRED", f"The session expired at {session['expires_at']}: log in again.")
        return None

    def auth_failure(self, call: Call) -> Reply:
        if call.name == "login":
            return fail("INVALID_CREDENTIALS", "Email or password is incorrect.")
        return fail("TOKEN_EXPIRED", "The session has expired: log in again.")

    # --- tools ---------------------------------------------------------------------------------------------

    def do_login(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        if (args["email"].strip().lower(), args["password"]) != (state["login"]["email"], state["login"]["password"]):
            return fail("INVALID_CREDENTIALS", "Email or password is incorrect.")
        token = SESSION_PREFIX + _derived62(state, f"session{len(state['sessions'])}", SESSION_CHARS)
        expires = _stamp(_parse(state["now"]) + dt.timedelta(hours=SESSION_HOURS))
        state["sessions"].append({"token": token, "expires_at": expires})
        return Reply({"session_token": token, "expires_at": expires, "account_id": state["account"]["id"]},
                     message=f"Logged in to {state['account']['business']}; the session lasts {SESSION_HOURS} hour.")

    def do_get_balance(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        balance = state["balance"]
        return Reply(dict(balance), message=f"{money(balance['available_cents'])} available, "
                                            f"{money(balance['pending_cents'])} pending.")

    def do_create_charge(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        customer = next((c for c in state["customers"] if c["id"] == args["customer_id"]), None)
        amount, currency = args["amount_cents"], args["currency"]
        if customer is None:
            return fail("CUSTOMER_NOT_FOUND", f"No customer {args['customer_id']}.")
        if amount < MIN_CHARGE_CENTS:
            return fail("AMOUNT_TOO_SMALL", f"Charges must be at least {MIN_CHARGE_CENTS} cents.")
        if not customer["card_ok"]:
            return fail("CARD_DECLINED", f"The {customer['card']} card was declined.")
        charge_id = "ch_" + _derived62(state, f"charge{len(state['charges'])}", ID_CHARS)
        state["charges"].insert(0, {"id": charge_id, "customer_id": customer["id"], "amount_cents": amount,
                                    "currency": currency, "refunded_cents": 0})
        if currency == state["balance"]["currency"]:
            state["balance"]["pending_cents"] += amount
        return Reply({"charge_id": charge_id, "customer_id": customer["id"], "amount_cents": amount,
                      "currency": currency}, message=f"Charged {customer['name']} {amount_text(amount, {'currency': currency})}.")

    def do_refund_charge(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        charge = next((c for c in state["charges"] if c["id"] == args["charge_id"]), None)
        if charge is None:
            return fail("CHARGE_NOT_FOUND", f"No charge {args['charge_id']}.")
        left = charge["amount_cents"] - charge["refunded_cents"]
        amount = args.get("amount_cents", left)
        if left == 0:
            return fail("CHARGE_ALREADY_REFUNDED", f"Charge {charge['id']} is refunded in full.")
        if amount > left:
            return fail("AMOUNT_EXCEEDS_CHARGE", f"At most {amount_text(left, charge)} can still be refunded.")
        if charge["currency"] == state["balance"]["currency"] and amount > state["balance"]["available_cents"]:
            return fail("INSUFFICIENT_BALANCE", "The available balance is too low for this refund.")
        refunded, status = amount, OK
        if steer.partial_success and amount >= 2:
            refunded, status = amount // 2, PARTIAL
        refund_id = "re_" + _derived62(state, f"refund{len(state['refunds'])}", ID_CHARS)
        charge["refunded_cents"] += refunded
        state["refunds"].append({"id": refund_id, "charge_id": charge["id"], "amount_cents": refunded})
        if charge["currency"] == state["balance"]["currency"]:
            state["balance"]["available_cents"] -= refunded
        message = f"Refunded {amount_text(refunded, charge)} on {charge['id']}."
        if status == PARTIAL:
            message = f"Only {amount_text(refunded, charge)} of {amount_text(amount, charge)} could be refunded now."
        return Reply({"charge_id": charge["id"], "refund_id": refund_id, "refunded": True,
                      "amount_refunded_cents": refunded, "total_refunded_cents": charge["refunded_cents"],
                      "charge_amount_cents": charge["amount_cents"]}, message=message, status=status)

    def lookup(self, state: JSON, tool: str, args: JSON) -> JSON | None:
        if tool != "list_charges":
            return None
        matching = _charges_matching(state, args)
        return {"charges_matching": len(matching), "charges_on_first_page": matching[:DEFAULT_PAGE_SIZE]}

    def do_list_charges(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        matching = _charges_matching(state, args)
        if steer.empty_result:
            matching = []
        shown = matching[: steer.page_size or DEFAULT_PAGE_SIZE]
        rows = [{"charge_id": c["id"], "amount_cents": c["amount_cents"], "currency": c["currency"],
                 "refunded_cents": c["refunded_cents"]} for c in shown]
        return Reply({"charges": rows, "total": len(matching), "has_more": len(rows) < len(matching)},
                     message=f"Showing {len(rows)} of {len(matching)} charges.")

    def do_create_api_key(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        label = args["label"].strip()
        if not label:
            return fail("INVALID_ARGUMENT", "The label must not be empty.")
        if any(key["label"] == label for key in state["api_keys"]):
            return fail("DUPLICATE_LABEL", f"A key labelled '{label}' already exists.")
        key = API_KEY_PREFIX + _derived62(state, f"key{len(state['api_keys'])}", API_KEY_CHARS)
        key_id = "key_" + _derived62(state, f"keyid{len(state['api_keys'])}", KEY_ID_CHARS)
        state["api_keys"].append({"key_id": key_id, "label": label, "prefix": key[: len(API_KEY_PREFIX) + 4]})
        return Reply({"key_id": key_id, "api_key": key, "label": label},
                     message="Store this key now: it will not be shown again.")

    # --- scripted agent ------------------------------------------------------------------------------------

    def valid_call(self, state: JSON, rng: random.Random) -> Call:
        token = _live_token(state)
        if token is None or rng.random() < 0.1:
            return Call("login", dict(state["login"]))
        auth = {"session_token": token}
        roll = rng.random()
        if roll < 0.15:
            return Call("get_balance", auth)
        if roll < 0.4:
            args = {**auth, "customer_id": rng.choice(state["customers"])["id"],
                    "amount_cents": rng.randrange(10, 300) * 100 + rng.choice([0, 50, 99]), "currency": "usd"}
            if rng.random() < 0.4:
                args["description"] = rng.choice(["Order #1042", "Monthly subscription", "Gift card", "Workshop seat"])
            return Call("create_charge", args)
        if roll < 0.7:
            charge = rng.choice(state["charges"])
            args = {**auth, "charge_id": charge["id"]}
            left = charge["amount_cents"] - charge["refunded_cents"]
            if left > 1 and rng.random() < 0.6:
                args["amount_cents"] = rng.randrange(1, left)
            return Call("refund_charge", args)
        if roll < 0.88:
            args = dict(auth)
            if rng.random() < 0.4:
                args["customer_id"] = rng.choice(state["customers"])["id"]
            return Call("list_charges", args)
        return Call("create_api_key", {**auth, "label": rng.choice(["checkout-server", "reporting", "mobile-app", "website"])})

    def invalid_call(self, state: JSON, rng: random.Random) -> Call:
        live = _live_token(state)
        choice = rng.randrange(6)
        if choice == 0:  # the stale session from before, or a made-up one
            token = rng.choice([state["sessions"][0]["token"], SESSION_PREFIX + "abc123", "Bearer " + (live or "x")])
            return Call(rng.choice(["get_balance", "list_charges"]), {"session_token": token})
        if choice == 1:
            return Call("login", {"email": state["login"]["email"], "password": rng.choice(["password", "letmein123"])})
        if choice == 2:
            return Call("get_balance", {})
        auth = {"session_token": live or state["sessions"][0]["token"]}
        if choice == 3:
            return Call("create_charge", {**auth, "customer_id": "cus_" + _random62(rng, 14), "amount_cents": 2500,
                                          "currency": "usd"})
        if choice == 4:
            charge = rng.choice(state["charges"])
            return Call("refund_charge", {**auth, "charge_id": charge["id"], "amount_cents": charge["amount_cents"] + 100})
        return Call("create_charge", {**auth, "customer_id": rng.choice(state["customers"])["id"],
                                      "amount_cents": rng.choice([5, 49]), "currency": "usd"})


def amount_text(cents: int, charge: JSON) -> str:
    """Cents in the charge's currency for messages: 1299 usd -> $12.99, 1299 eur -> 12.99 EUR."""
    return money(cents) if charge["currency"] == "usd" else f"{cents // 100}.{cents % 100:02d} {charge['currency'].upper()}"


def _random62(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(BASE62) for _ in range(length))


def _derived62(state: JSON, purpose: str, length: int) -> str:
    """A random-looking but deterministic id: the same state and purpose always give the same text."""
    digest = hashlib.sha256(f"{state['account']['id']}|{state['now']}|{purpose}".encode()).digest()
    number = int.from_bytes(digest, "big")
    chars = []
    for _ in range(length):
        number, digit = divmod(number, 62)
        chars.append(BASE62[digit])
    return "".join(chars)


def _stamp(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(stamp: str) -> dt.datetime:
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)


def _live_token(state: JSON) -> str | None:
    live = [s["token"] for s in state["sessions"] if s["expires_at"] > state["now"]]
    return live[-1] if live else None


def _charges_matching(state: JSON, args: JSON) -> list[JSON]:
    """The charges a listing with these arguments pages through, newest first as the state keeps them."""
    return [c for c in state["charges"] if args.get("customer_id") in (None, c["customer_id"])]
