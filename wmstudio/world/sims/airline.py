"""Airline bookings under fare rules: basic fares are non-refundable and unchangeable, standard fares pay fees.

Seats are limited and shared by everyone, so booking, cancelling and changing all move seat counts; prices
come from the published fares and never drift."""

from __future__ import annotations

import datetime as dt
import hashlib
import random

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

FARES = ["basic", "standard", "flex"]
FARE_MULTIPLIER = {"basic": 1.0, "standard": 1.45, "flex": 2.1}
STANDARD_CANCEL_FEE = 10000  # cents per passenger
STANDARD_CHANGE_FEE = 7500  # cents per passenger
DEFAULT_PAGE_SIZE = 5
MAX_PASSENGERS = 9
ROUTES = [("SFO", "JFK", 21900), ("SEA", "DEN", 12900), ("BOS", "ORD", 14900), ("LAX", "SEA", 11900),
          ("ATL", "MIA", 9900), ("AUS", "DCA", 17900), ("JFK", "LAX", 24900), ("DEN", "PHX", 8900)]
PASSENGERS = ["Ana Costa", "Ben Okafor", "Chloe Dubois", "Daniel Kim", "Eva Lindqvist", "Farid Haddad"]
PNR_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
FARE = string(enum=[""] + FARES)
MATCHING_FLIGHT = "state.flights.filter(f, f.flight == response.flight)"  # see retail.py on filter vs exists
# what the error rules read: ids match as the simulator matches them (upper case), and a booking made in the history
# counts as one of the state's
BOOKING_REF = 'call.arguments.booking_id.matches("(?i)^" + {b}.booking_id + "$")'
BOOKED = ('history.filter(h, h.call.name == "book_flight" && h.response.status != "error" && '
          'call.arguments.booking_id.matches("(?i)^" + h.response.booking_id + "$"))')
KNOWN_BOOKING = f'(state.bookings.exists(b, {BOOKING_REF.format(b="b")}) || size({BOOKED}) > 0)'
NEW_FLIGHT = 'state.flights.filter(f, call.arguments.{arg}.matches("(?i)^" + f.flight + "$"))'
# a date that is certainly real (29 February aside): anything else may be refused as not YYYY-MM-DD
SURE_DATE = ("^[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|"
             "02-(0[1-9]|1[0-9]|2[0-8]))$")
SEATS_TAKEN = ('history.exists(h, h.call.name in ["book_flight", "change_booking"] && h.response.status != "error" '
               '&& h.response.flight == f.flight)')


class AirlineSimulator(Simulator):
    """An airline's booking API: search flights, book, look up, cancel and change bookings."""

    name = "airline"
    description = "Airline bookings with fare rules: non-refundable basic fares, change fees, limited seats."
    task = (
        "You are a travel agent for one traveller. Find flights, book them, and handle cancellations and "
        "changes while following the airline's fare rules."
    )
    echo_fields = ("flight",)

    def tools(self) -> list[Tool]:
        booking_id = string("Booking reference, 6 characters, e.g. K7QX2M")
        flight = string("Flight number, e.g. NX482")
        cents = integer(minimum=0)
        return [
            make_tool(
                "search_flights", "Find flights on a route and date, with seats left and the price of one fare class.",
                params({"origin": string("Origin airport code, e.g. SFO"),
                        "destination": string("Destination airport code, e.g. JFK"),
                        "date": string("Departure date, YYYY-MM-DD"),
                        "fare": string("Fare class to price (default basic)", enum=FARES)},
                       ["origin", "destination", "date"]),
                response_schema({
                    "fare": FARE,
                    "flights": array(record({"flight": string(), "departs": string("HH:MM"),
                                             "seats_left": cents, "price_cents": integer("Per passenger", 0)}),
                                     "Earliest first"),
                    "total": integer("Flights found in all", 0),
                }),
            ),
            make_tool(
                "get_booking", "Look up a booking by its reference.",
                params({"booking_id": booking_id}, ["booking_id"]),
                response_schema({
                    "booking_id": string(), "flight": string(), "date": string(), "fare": FARE,
                    "passengers": cents, "paid_cents": cents,
                    "booking_status": string(enum=["", "confirmed", "cancelled"]),
                }),
            ),
            make_tool(
                "book_flight", "Book seats on a flight in one fare class and charge the card on file.",
                params({"flight": flight, "fare": string("Fare class", enum=FARES),
                        "passengers": integer("Number of passengers", 1, MAX_PASSENGERS)},
                       ["flight", "fare", "passengers"]),
                response_schema({
                    "booking_id": string('New reference; "" if none'), "flight": string(), "fare": FARE,
                    "passengers": cents, "seats_confirmed": integer("The rest are waitlisted", 0),
                    "charged_cents": cents,
                }, statuses=(OK, PARTIAL, ERROR)),
            ),
            make_tool(
                "cancel_booking", "Cancel a booking; the refund follows the fare rules.",
                params({"booking_id": booking_id}, ["booking_id"]),
                response_schema({
                    "booking_id": string(), "fare": FARE, "cancelled": boolean(), "paid_cents": cents,
                    "fee_cents": cents, "refund_cents": cents,
                }),
            ),
            make_tool(
                "change_booking", "Move a booking to another flight on the same route, paying fees and fare difference.",
                params({"booking_id": booking_id, "new_flight": flight}, ["booking_id", "new_flight"]),
                response_schema({
                    "booking_id": string(), "flight": string('Flight now booked; "" if unchanged'), "fare": FARE,
                    "changed": boolean(), "change_fee_cents": cents, "fare_difference_cents": cents,
                    "total_due_cents": cents,
                }),
            ),
        ]

    def rules(self) -> list[Rule]:
        return [
            Rule("Basic fares are non-refundable: cancelling one refunds nothing",
                 'call.name != "cancel_booking" || response.fare != "basic" || response.refund_cents == 0'),
            Rule("A cancellation refunds what was paid less the fee, never more; an error refunds nothing",
                 'call.name != "cancel_booking" || (response.cancelled ? response.refund_cents + response.fee_cents '
                 '== response.paid_cents || response.fare == "basic" : response.refund_cents == 0)'),
            Rule("Flex fares cancel and change without fees",
                 '!(call.name in ["cancel_booking", "change_booking"]) || response.fare != "flex" || '
                 '(call.name == "cancel_booking" ? response.fee_cents == 0 : response.change_fee_cents == 0)'),
            Rule("Basic fares cannot be changed",
                 'call.name != "change_booking" || !response.changed || response.fare != "basic"'),
            Rule("A change costs its fee plus the fare difference; an unchanged booking costs nothing",
                 'call.name != "change_booking" || (response.total_due_cents == response.change_fee_cents + '
                 'response.fare_difference_cents && (response.changed || response.total_due_cents == 0))'),
            Rule("A booking charges the published fare for each confirmed seat, never more seats than asked",
                 'call.name != "book_flight" ? true : response.seats_confirmed <= response.passengers && '
                 '(response.status == "error" ? response.charged_cents == 0 && response.booking_id == "" : '
                 f'{MATCHING_FLIGHT}.exists(f, response.charged_cents == f.fares[response.fare] * '
                 'response.seats_confirmed))'),
            Rule("Search results quote the published fares and never list more flights than found",
                 'call.name != "search_flights" ? true : size(response.flights) <= response.total && '
                 'response.flights.all(r, state.flights.filter(f, f.flight == r.flight).all(f, '
                 'f.fares[response.fare] == r.price_cents))'),
            *self.error_rules(),
        ]

    def error_rules(self) -> list[Rule]:
        """Each error code's cause (sims/preconditions.py). Seats move with every booking, cancellation and change,
        so a seat shortage needs the initial count short or an earlier step that took seats on the flight."""
        booking_tools = ["get_booking", "cancel_booking", "change_booking"]
        own = f'state.bookings.filter(b, {BOOKING_REF.format(b="b")})'
        cancelled = (f'{own}.exists(b, b.status == "cancelled") || history.exists(h, h.call.name == "cancel_booking" '
                     '&& h.response.status == "ok" && call.arguments.booking_id.matches("(?i)^" + h.response.booking_id '
                     '+ "$"))')
        other_route = ('state.flights.exists(o, o.flight == {flight} && (o.origin != n.origin || '
                       'o.destination != n.destination))')
        changes = ('history.filter(h, h.call.name == "change_booking" && h.response.status == "ok" && '
                   'call.arguments.booking_id.matches("(?i)^" + h.response.booking_id + "$"))')
        on_new = 'call.arguments.new_flight.matches("(?i)^" + {flight} + "$")'
        on_last = on_new.format(flight=f"{changes}[size({changes}) - 1].response.flight")
        on_booked, on_made = on_new.format(flight="b.flight"), on_new.format(flight="h.response.flight")
        pax_over = 'state.bookings.exists(b, {ref} && b.passengers > f.seats_left) || {booked}.exists(h, '                    'h.response.seats_confirmed > f.seats_left)'
        return [
            precondition("INVALID_ROUTE", "INVALID_ROUTE: origin is the destination", ["search_flights"],
                         '!call.arguments.destination.matches("^[A-Za-z0-9]*$") || '
                         'call.arguments.origin.matches("(?i)^" + call.arguments.destination + "$")'),
            precondition("DATE_IN_PAST", "DATE_IN_PAST: date before today", ["search_flights"],
                         "call.arguments.date < state.today"),
            precondition("FLIGHT_NOT_FOUND", "FLIGHT_NOT_FOUND: unknown flight",
                         ["book_flight", "change_booking"],
                         '!state.flights.exists(f, call.arguments[call.name == "book_flight" ? "flight" : '
                         '"new_flight"].matches("(?i)^" + f.flight + "$"))'),
            precondition(["SOLD_OUT", "NOT_ENOUGH_SEATS"], "SOLD_OUT, NOT_ENOUGH_SEATS: too few seats",
                         ["book_flight", "change_booking"],
                         f'call.name == "book_flight" ? {NEW_FLIGHT.format(arg="flight")}.exists(f, {SEATS_TAKEN} || '
                         '(response.error == "SOLD_OUT" ? f.seats_left == 0 : call.arguments.passengers > f.seats_left)) '
                         f': response.error == "NOT_ENOUGH_SEATS" && {NEW_FLIGHT.format(arg="new_flight")}.exists(f, '
                         f'{SEATS_TAKEN} || '
                         + pax_over.format(ref=BOOKING_REF.format(b="b"), booked=BOOKED) + ')'),
            precondition("BOOKING_NOT_FOUND", "BOOKING_NOT_FOUND: unknown booking", booking_tools,
                         f"!{KNOWN_BOOKING}", steered_by="empty_result"),
            precondition(["ALREADY_CANCELLED", "BOOKING_CANCELLED"], "ALREADY_CANCELLED, BOOKING_CANCELLED: booking "
                         "cancelled", ["cancel_booking", "change_booking"],
                         'call.name == (response.error == "ALREADY_CANCELLED" ? "cancel_booking" : "change_booking") '
                         f'&& ({cancelled})'),
            precondition("CHANGE_NOT_ALLOWED", "CHANGE_NOT_ALLOWED: basic fare", ["change_booking"],
                         f'{own}.exists(b, b.fare == "basic") || {BOOKED}.exists(h, h.response.fare == "basic")'),
            precondition("SAME_FLIGHT", "SAME_FLIGHT: already on that flight", ["change_booking"],
                         f"size({changes}) > 0 ? {on_last} : {own}.exists(b, {on_booked}) || "
                         f"{BOOKED}.exists(h, {on_made})"),
            precondition("ROUTE_MISMATCH", "ROUTE_MISMATCH: another route", ["change_booking"],
                         f'{NEW_FLIGHT.format(arg="new_flight")}.exists(n, {own}.exists(b, '
                         f'{other_route.format(flight="b.flight")}) || {BOOKED}.exists(h, '
                         f'{other_route.format(flight="h.response.flight")}))'),
            *argument_rules(self.tools(), {"search_flights": f'!call.arguments.date.matches("{SURE_DATE}")'}),
        ]

    def initial_state(self, rng: random.Random) -> JSON:
        today = dt.date(2025, 1, 1) + dt.timedelta(days=rng.randrange(365))
        flights, numbers = [], rng.sample(range(100, 2000), 12)
        for origin, destination, base in rng.sample(ROUTES, 2):
            first = today + dt.timedelta(days=rng.randrange(5, 30))
            for date, count in ((first, rng.choice([2, 3])), (first + dt.timedelta(days=1), rng.choice([1, 2]))):
                for hour in sorted(rng.sample(range(6, 22), count)):
                    price = base + rng.randrange(-30, 60) * 100
                    flights.append({
                        "flight": f"NX{numbers.pop()}", "origin": origin, "destination": destination,
                        "date": date.isoformat(), "departs": f"{hour:02d}:{rng.choice([0, 15, 30, 45]):02d}",
                        "seats_left": rng.choice([0, 1, 2, 3, 4, 6, 9]),
                        "fares": {fare: _price(price, fare) for fare in FARES},
                    })
        state = {"today": today.isoformat(), "traveller": rng.choice(PASSENGERS), "flights": flights, "bookings": []}
        for fare in rng.sample(FARES, rng.choice([2, 3])):
            flight, passengers = rng.choice(flights), rng.choice([1, 1, 2])
            state["bookings"].append({
                "booking_id": _pnr(state, flight["flight"]), "flight": flight["flight"], "fare": fare,
                "passengers": passengers, "paid_cents": flight["fares"][fare] * passengers, "status": "confirmed",
            })
        return state

    # --- tools ---------------------------------------------------------------------------------------------

    def lookup(self, state: JSON, tool: str, args: JSON) -> JSON | None:
        if tool != "search_flights" or _date(args["date"]) is None:
            return None
        found = _flights_matching(state, args["origin"], args["destination"], _date(args["date"]).isoformat())
        return {"flights_matching": len(found), "flights_on_first_page": found[:DEFAULT_PAGE_SIZE]}

    def do_search_flights(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        fare, date = args.get("fare", "basic"), args["date"]
        if args["origin"].upper() == args["destination"].upper():
            return fail("INVALID_ROUTE", "Origin and destination must be different airports.")
        parsed = _date(date)
        if parsed is None:
            return fail("INVALID_ARGUMENT", f"Date '{date}' is not YYYY-MM-DD.")
        if parsed < dt.date.fromisoformat(state["today"]):
            return fail("DATE_IN_PAST", f"{date} is in the past; search from {state['today']} on.")
        found = _flights_matching(state, args["origin"], args["destination"], parsed.isoformat())
        if steer.empty_result:
            found = []
        shown = found[: steer.page_size or DEFAULT_PAGE_SIZE]
        rows = [{"flight": f["flight"], "departs": f["departs"], "seats_left": f["seats_left"],
                 "price_cents": f["fares"][fare]} for f in shown]
        return Reply({"fare": fare, "flights": rows, "total": len(found)},
                     message=f"{len(found)} flight(s) from {args['origin'].upper()} to "
                             f"{args['destination'].upper()} on {parsed.isoformat()}.")

    def do_get_booking(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        booking = _booking(state, args["booking_id"])
        if booking is None or steer.empty_result:
            return _no_booking(args["booking_id"])
        flight = _flight(state, booking["flight"])
        return Reply({"booking_id": booking["booking_id"], "flight": booking["flight"], "date": flight["date"],
                      "fare": booking["fare"], "passengers": booking["passengers"],
                      "paid_cents": booking["paid_cents"], "booking_status": booking["status"]},
                     message=f"Booking {booking['booking_id']} on {booking['flight']} is {booking['status']}.")

    def do_book_flight(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        flight, fare, wanted = _flight(state, args["flight"]), args["fare"], args["passengers"]
        if flight is None:
            return fail("FLIGHT_NOT_FOUND", f"No flight {args['flight']}.")
        if flight["seats_left"] == 0:
            return fail("SOLD_OUT", f"Flight {flight['flight']} is sold out.", flight=flight["flight"])
        if wanted > flight["seats_left"]:
            return fail("NOT_ENOUGH_SEATS", f"Only {flight['seats_left']} seat(s) left on {flight['flight']}.",
                        flight=flight["flight"])
        confirmed, status = wanted, OK
        if steer.partial_success and wanted >= 2:
            confirmed, status = (wanted + 1) // 2, PARTIAL
        charged = flight["fares"][fare] * confirmed
        booking_id = _pnr(state, flight["flight"])
        state["bookings"].append({"booking_id": booking_id, "flight": flight["flight"], "fare": fare,
                                  "passengers": confirmed, "paid_cents": charged, "status": "confirmed"})
        flight["seats_left"] -= confirmed
        message = f"Booked {confirmed} seat(s) on {flight['flight']} ({fare}) for {money(charged)}."
        if status == PARTIAL:
            message = f"Only {confirmed} of {wanted} seats were confirmed; the others are waitlisted."
        return Reply({"booking_id": booking_id, "flight": flight["flight"], "fare": fare, "passengers": wanted,
                      "seats_confirmed": confirmed, "charged_cents": charged}, message=message, status=status)

    def do_cancel_booking(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        booking = _booking(state, args["booking_id"])
        if booking is None:
            return _no_booking(args["booking_id"])
        if booking["status"] == "cancelled":
            return fail("ALREADY_CANCELLED", f"Booking {booking['booking_id']} is already cancelled.",
                        booking_id=booking["booking_id"])
        paid, fare = booking["paid_cents"], booking["fare"]
        fee = {"basic": 0, "standard": min(paid, STANDARD_CANCEL_FEE * booking["passengers"]), "flex": 0}[fare]
        refund = 0 if fare == "basic" else paid - fee
        booking["status"] = "cancelled"
        _flight(state, booking["flight"])["seats_left"] += booking["passengers"]
        return Reply({"booking_id": booking["booking_id"], "fare": fare, "cancelled": True, "paid_cents": paid,
                      "fee_cents": fee, "refund_cents": refund},
                     message=f"Booking {booking['booking_id']} cancelled; {money(refund)} refunded"
                             + (" (basic fares are non-refundable)." if fare == "basic" else "."))

    def do_change_booking(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        booking = _booking(state, args["booking_id"])
        if booking is None:
            return _no_booking(args["booking_id"])
        ref = booking["booking_id"]
        new = _flight(state, args["new_flight"])
        old = _flight(state, booking["flight"])
        problem = None
        if booking["status"] == "cancelled":
            problem = ("BOOKING_CANCELLED", f"Booking {ref} is cancelled and cannot be changed.")
        elif booking["fare"] == "basic":
            problem = ("CHANGE_NOT_ALLOWED", "Basic fares cannot be changed.")
        elif new is None:
            problem = ("FLIGHT_NOT_FOUND", f"No flight {args['new_flight']}.")
        elif new["flight"] == old["flight"]:
            problem = ("SAME_FLIGHT", f"Booking {ref} is already on {old['flight']}.")
        elif (new["origin"], new["destination"]) != (old["origin"], old["destination"]):
            route = f"{old['origin']}-{old['destination']}"
            problem = ("ROUTE_MISMATCH", f"{new['flight']} does not fly {route}.")
        elif new["seats_left"] < booking["passengers"]:
            problem = ("NOT_ENOUGH_SEATS", f"Only {new['seats_left']} seat(s) left on {new['flight']}.")
        if problem:
            return fail(*problem, booking_id=ref)
        pax, fare = booking["passengers"], booking["fare"]
        fee = STANDARD_CHANGE_FEE * pax if fare == "standard" else 0
        difference = max(0, new["fares"][fare] - old["fares"][fare]) * pax
        old["seats_left"] += pax
        new["seats_left"] -= pax
        booking["flight"] = new["flight"]
        booking["paid_cents"] += fee + difference
        return Reply({"booking_id": ref, "flight": new["flight"], "fare": fare, "changed": True,
                      "change_fee_cents": fee, "fare_difference_cents": difference,
                      "total_due_cents": fee + difference},
                     message=f"Booking {ref} moved to {new['flight']} on {new['date']}; {money(fee + difference)} charged.")

    # --- scripted agent ------------------------------------------------------------------------------------

    def valid_call(self, state: JSON, rng: random.Random) -> Call:
        flight, bookings = rng.choice(state["flights"]), state["bookings"]
        roll = rng.random()
        if roll < 0.25 or not bookings:
            args = {"origin": flight["origin"], "destination": flight["destination"], "date": flight["date"]}
            if rng.random() < 0.5:
                args["fare"] = rng.choice(FARES)
            return Call("search_flights", args) if roll < 0.25 else Call(
                "book_flight", {"flight": flight["flight"], "fare": rng.choice(FARES), "passengers": rng.choice([1, 1, 2, 3])})
        booking = rng.choice(bookings)
        if roll < 0.4:
            return Call("get_booking", {"booking_id": booking["booking_id"]})
        if roll < 0.6:
            return Call("book_flight", {"flight": flight["flight"], "fare": rng.choice(FARES),
                                        "passengers": rng.choice([1, 1, 2, 3])})
        if roll < 0.8:
            return Call("cancel_booking", {"booking_id": booking["booking_id"]})
        old = _flight(state, booking["flight"])
        same_route = [f for f in state["flights"] if (f["origin"], f["destination"]) == (old["origin"], old["destination"])
                      and f["flight"] != old["flight"]] or [flight]
        return Call("change_booking", {"booking_id": booking["booking_id"], "new_flight": rng.choice(same_route)["flight"]})

    def invalid_call(self, state: JSON, rng: random.Random) -> Call:
        unknown_ref = "".join(rng.choice(PNR_LETTERS) for _ in range(6))
        flight = rng.choice(state["flights"])
        choice = rng.randrange(6)
        if choice == 0:
            return Call(rng.choice(["get_booking", "cancel_booking"]), {"booking_id": unknown_ref})
        if choice == 1:
            return Call("book_flight", {"flight": f"NX{rng.randrange(2000, 9999)}", "fare": "basic", "passengers": 1})
        if choice == 2:  # policy: more passengers than seats
            return Call("book_flight", {"flight": flight["flight"], "fare": rng.choice(FARES),
                                        "passengers": min(MAX_PASSENGERS, flight["seats_left"] + rng.randrange(1, 3))})
        if choice == 3:  # policy: change a basic fare (or move to another route)
            basic = [b for b in state["bookings"] if b["fare"] == "basic"] or state["bookings"]
            if basic:
                return Call("change_booking", {"booking_id": rng.choice(basic)["booking_id"], "new_flight": flight["flight"]})
        if choice == 4:
            return Call("search_flights", {"origin": flight["origin"], "destination": flight["origin"], "date": flight["date"]})
        return Call("search_flights", {"origin": flight["origin"], "destination": flight["destination"],
                                       "date": rng.choice(["next friday", "2024-02-30", state["today"][:7]])})


def _price(base: int, fare: str) -> int:
    return int(base * FARE_MULTIPLIER[fare]) // 100 * 100


def _pnr(state: JSON, flight: str) -> str:
    digest = hashlib.sha256(f"{state['today']}|{flight}|{len(state['bookings'])}".encode()).digest()
    return "".join(PNR_LETTERS[b % len(PNR_LETTERS)] for b in digest[:6])


def _date(text: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        return None


def _flight(state: JSON, number: str) -> JSON | None:
    return next((f for f in state["flights"] if f["flight"] == number.upper()), None)


def _booking(state: JSON, ref: str) -> JSON | None:
    return next((b for b in state["bookings"] if b["booking_id"] == ref.upper()), None)


def _no_booking(ref: str) -> Reply:
    return fail("BOOKING_NOT_FOUND", f"No booking {ref}.", booking_id=ref)


def _flights_matching(state: JSON, origin: str, destination: str, date: str) -> list[JSON]:
    """The flights on a route and date, earliest first (what a search pages through)."""
    found = [f for f in state["flights"]
             if f["origin"] == origin.upper() and f["destination"] == destination.upper() and f["date"] == date]
    return sorted(found, key=lambda f: f["departs"])
