"""Retail orders and refunds: refunds only for delivered orders within 30 days, never above what is left.

The world the paper's canonical failure comes from (a trailing error status after `refund_processed: true`),
so its rules pin exactly that coherence."""

from __future__ import annotations

import datetime as dt
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

REFUND_WINDOW_DAYS = 30
DEFAULT_PAGE_SIZE = 5
ORDER_STATUSES = ["pending", "processing", "shipped", "delivered", "cancelled"]
PRODUCTS = [
    ("SKU-1042", "Wireless Mouse", 1899, 3499), ("SKU-2210", "USB-C Charger 65W", 2499, 4599),
    ("SKU-3318", "Noise-Cancelling Headphones", 8999, 24999), ("SKU-4471", "Mechanical Keyboard", 5999, 12999),
    ("SKU-5120", "27in Monitor", 17999, 32999), ("SKU-6034", "Laptop Stand", 2299, 4999),
    ("SKU-7125", "HD Webcam", 3999, 8999), ("SKU-8260", "Desk Lamp", 1999, 5499),
    ("SKU-9087", "Portable SSD 1TB", 7999, 13999), ("SKU-9315", "Phone Case", 999, 2999),
]
CUSTOMERS = [
    ("Dana Whitfield", "dana.whitfield"), ("Marcus Oyelaran", "m.oyelaran"), ("Priya Raman", "priya.raman"),
    ("Tomás Herrera", "tomas.herrera"), ("Lena Vogt", "lena.vogt"), ("Kenji Watanabe", "k.watanabe"),
]
# cel-python walks every element's whole body in exists(), and lets an error inside filter() escape a `||`,
# so order checks filter by id first and guard the tool with a conditional, not with `||`.
MATCHING_ORDER = "state.orders.filter(o, o.id == response.order_id)"
CALLED_ORDER = "state.orders.filter(o, o.id == call.arguments.order_id)"
CANCELLED_BEFORE = ('history.filter(h, h.call.name == "cancel_order").exists(h, h.response.status == "ok" && '
                    'h.response.order_id == call.arguments.order_id)')
REFUNDS_BEFORE = 'history.filter(h, h.call.name == "refund_order" && h.response.status != "error")'
ORDER_STATUS = string(enum=[""] + ORDER_STATUSES)


class RetailSimulator(Simulator):
    """An online shop's order API for one customer: look up, list, refund and cancel orders."""

    name = "retail"
    description = "Online shop orders and refunds for one customer, with a 30-day refund window."
    task = (
        "You are the shop's support agent. Help the customer with their orders: look them up, cancel orders "
        "that have not shipped, and refund delivered items the customer is unhappy with."
    )

    def tools(self) -> list[Tool]:
        order_id, date, cents = string("Order id, e.g. ORD-10421"), string("YYYY-MM-DD"), integer(minimum=0)
        return [
            make_tool(
                "get_order", "Look up one order with its items, status and refunds so far.",
                params({"order_id": order_id}, ["order_id"]),
                response_schema({
                    "order_id": string(), "order_status": ORDER_STATUS, "placed_on": date,
                    "delivered_on": string('YYYY-MM-DD; "" if not delivered'),
                    "total_cents": cents, "refunded_cents": cents,
                    "items": array(record({"sku": string(), "name": string(), "qty": integer(minimum=1),
                                           "price_cents": cents})),
                }),
            ),
            make_tool(
                "list_orders", f"List the customer's orders, newest first, {DEFAULT_PAGE_SIZE} per page.",
                params({"status": string("Only orders with this status", enum=ORDER_STATUSES),
                        "page": integer("Page number, from 1", 1)}),
                response_schema({
                    "orders": array(record({"order_id": string(), "order_status": ORDER_STATUS,
                                            "total_cents": cents, "placed_on": date})),
                    "total": integer("Matching orders over all pages", 0),
                    "page": integer(minimum=0), "has_more": boolean(),
                }),
            ),
            make_tool(
                "refund_order", "Refund part or all of a delivered order to the original payment method.",
                params({"order_id": order_id, "amount_cents": integer("Amount to refund in cents", 1),
                        "reason": string("Why the customer wants a refund")}, ["order_id", "amount_cents"]),
                response_schema({
                    "order_id": string(), "refund_id": string('e.g. RF-70001; "" if none'),
                    "refund_processed": boolean(), "amount_refunded_cents": cents,
                    "total_refunded_cents": integer("Refunded on the order so far, this call included", 0),
                    "order_total_cents": cents,
                }, statuses=(OK, PARTIAL, ERROR)),
            ),
            make_tool(
                "cancel_order", "Cancel an order that has not shipped yet; its payment is voided in full.",
                params({"order_id": order_id}, ["order_id"]),
                response_schema({
                    "order_id": string(), "cancelled": boolean(), "order_status": ORDER_STATUS,
                    "refunded_cents": integer("Voided payment", 0),
                }),
            ),
        ]

    def rules(self) -> list[Rule]:
        within_window = (
            f'timestamp(state.today + "T00:00:00Z") - timestamp(o.delivered_on + "T00:00:00Z") '
            f'<= duration("{REFUND_WINDOW_DAYS * 24}h")'
        )
        return [
            Rule("An error status means no refund was processed",
                 'call.name != "refund_order" || response.status != "error" || response.refund_processed == false'),
            Rule("A processed refund moves a positive amount; an unprocessed one moves nothing",
                 'call.name != "refund_order" || (response.refund_processed ? response.amount_refunded_cents > 0 '
                 ': response.amount_refunded_cents == 0 && response.refund_id == "")'),
            Rule("Refunds never take an order's refunded total above the order total",
                 'call.name != "refund_order" || response.total_refunded_cents <= response.order_total_cents'),
            Rule(f"Refunds are only for delivered orders, within {REFUND_WINDOW_DAYS} days of delivery",
                 'call.name != "refund_order" ? true : !response.refund_processed || '
                 f'{MATCHING_ORDER}.exists(o, o.status == "delivered" && {within_window})'),
            Rule("Only pending or processing orders can be cancelled; an error cancels nothing",
                 'call.name != "cancel_order" ? true : (response.status == "error" ? !response.cancelled : '
                 f'{MATCHING_ORDER}.exists(o, o.status == "pending" || o.status == "processing"))'),
            Rule("Order totals never change",
                 'call.name != "get_order" ? true : response.status == "error" || '
                 f'{MATCHING_ORDER}.exists(o, o.total_cents == response.total_cents)'),
            Rule("A page of orders never lists more than the total, and the last page has has_more false",
                 'call.name != "list_orders" || (size(response.orders) <= response.total && '
                 '(!response.has_more || size(response.orders) > 0))'),
            *self.error_rules(),
        ]

    def error_rules(self) -> list[Rule]:
        """Each error code's cause (sims/preconditions.py): what the order, its refunds and the history must show."""
        expired = (f'timestamp(state.today + "T00:00:00Z") - timestamp(o.delivered_on + "T00:00:00Z") '
                   f'> duration("{REFUND_WINDOW_DAYS * 24}h")')
        order_tools = ["get_order", "refund_order", "cancel_order"]
        return [
            precondition("ORDER_NOT_FOUND", "ORDER_NOT_FOUND: unknown order id", order_tools,
                         '!state.orders.exists(o, o.id == call.arguments.order_id)', steered_by="empty_result"),
            precondition(["ORDER_CANCELLED", "ALREADY_CANCELLED"], "ORDER_CANCELLED, ALREADY_CANCELLED: order cancelled",
                         ["refund_order", "cancel_order"],
                         'call.name == (response.error == "ORDER_CANCELLED" ? "refund_order" : "cancel_order") && '
                         f'({CALLED_ORDER}.exists(o, o.status == "cancelled") || {CANCELLED_BEFORE})'),
            precondition("ORDER_NOT_DELIVERED", "ORDER_NOT_DELIVERED: refund before delivery", ["refund_order"],
                         f'{CALLED_ORDER}.exists(o, o.status != "delivered")'),
            precondition("REFUND_WINDOW_EXPIRED", f"REFUND_WINDOW_EXPIRED: delivered over {REFUND_WINDOW_DAYS} days ago",
                         ["refund_order"], f'{CALLED_ORDER}.exists(o, o.status == "delivered" && {expired})'),
            precondition("ALREADY_REFUNDED", "ALREADY_REFUNDED: nothing left to refund", ["refund_order"],
                         f'{CALLED_ORDER}.exists(o, o.refunded_cents == o.total_cents || {REFUNDS_BEFORE}'
                         '.exists(h, h.response.order_id == o.id && h.response.total_refunded_cents == o.total_cents))'),
            precondition("AMOUNT_EXCEEDS_REFUNDABLE", "AMOUNT_EXCEEDS_REFUNDABLE: amount over what is left",
                         ["refund_order"],
                         f'{CALLED_ORDER}.exists(o, call.arguments.amount_cents > o.total_cents - o.refunded_cents || '
                         f'{REFUNDS_BEFORE}.exists(h, h.response.order_id == o.id && '
                         'call.arguments.amount_cents > o.total_cents - h.response.total_refunded_cents))'),
            precondition(["ALREADY_SHIPPED", "ALREADY_DELIVERED"],
                         "ALREADY_SHIPPED, ALREADY_DELIVERED: cancel after shipping", ["cancel_order"],
                         f'{CALLED_ORDER}.exists(o, o.status == '
                         '(response.error == "ALREADY_SHIPPED" ? "shipped" : "delivered"))'),
            *argument_rules(self.tools()),
        ]

    def initial_state(self, rng: random.Random) -> JSON:
        today = dt.date(2025, 1, 1) + dt.timedelta(days=rng.randrange(365))
        name, handle = rng.choice(CUSTOMERS)
        kinds = ["delivered_recent", "delivered_old", "shipped", rng.choice(["pending", "processing"]),
                 rng.choice(["delivered_recent", "cancelled", "processing", "delivered_old"])]
        orders = [self._order(kind, today, rng) for kind in kinds]
        orders.sort(key=lambda o: o["placed_on"])
        number = rng.randrange(10000, 60000)
        for order in orders:
            number += rng.randrange(3, 400)
            order["id"] = f"ORD-{number}"
        orders.reverse()  # newest first, like the shop's own listing
        return {
            "today": today.isoformat(),
            "customer": {"id": f"CUS-{rng.randrange(1000, 9999)}", "name": name, "email": f"{handle}@example.com"},
            "orders": orders,
            "refunds": [],
        }

    def _order(self, kind: str, today: dt.date, rng: random.Random) -> JSON:
        items = []
        for sku, product, low, high in rng.sample(PRODUCTS, rng.choice([1, 1, 2, 2, 3])):
            items.append({"sku": sku, "name": product, "qty": rng.choice([1, 1, 1, 2]),
                          "price_cents": rng.randrange(low, high) // 100 * 100 + 99})
        total = sum(item["qty"] * item["price_cents"] for item in items)
        status, delivered_on, refunded = kind, "", 0
        if kind.startswith("delivered"):
            status = "delivered"
            ago = rng.randrange(0, REFUND_WINDOW_DAYS + 1) if kind == "delivered_recent" else rng.randrange(31, 120)
            delivered = today - dt.timedelta(days=ago)
            delivered_on, placed = delivered.isoformat(), delivered - dt.timedelta(days=rng.randrange(2, 7))
            if kind == "delivered_recent" and rng.random() < 0.3:
                refunded = items[0]["price_cents"]
        elif kind == "shipped":
            placed = today - dt.timedelta(days=rng.randrange(1, 5))
        elif kind == "cancelled":
            placed = today - dt.timedelta(days=rng.randrange(3, 60))
            refunded = total
        else:
            placed = today - dt.timedelta(days=rng.randrange(0, 3))
        return {"id": "", "status": status, "placed_on": placed.isoformat(), "delivered_on": delivered_on,
                "total_cents": total, "refunded_cents": refunded, "items": items}

    # --- tools ---------------------------------------------------------------------------------------------

    def do_get_order(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        order = _find(state, args["order_id"])
        if order is None or steer.empty_result:
            return _not_found(args["order_id"])
        return Reply({
            "order_id": order["id"], "order_status": order["status"], "placed_on": order["placed_on"],
            "delivered_on": order["delivered_on"], "total_cents": order["total_cents"],
            "refunded_cents": order["refunded_cents"], "items": order["items"],
        }, message=f"Order {order['id']} is {order['status']}; total {money(order['total_cents'])}.")

    def lookup(self, state: JSON, tool: str, args: JSON) -> JSON | None:
        if tool != "list_orders":
            return None
        page = args.get("page", 1)
        matching = _orders_matching(state, args)
        on_page = matching[(page - 1) * DEFAULT_PAGE_SIZE: page * DEFAULT_PAGE_SIZE] if page >= 1 else []
        return {"orders_matching": len(matching), "page": page,  # the records' own fields, their items aside
                "orders_on_page": [{k: v for k, v in o.items() if k != "items"} for o in on_page]}

    def do_list_orders(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        page, size = args.get("page", 1), steer.page_size or DEFAULT_PAGE_SIZE
        matching = _orders_matching(state, args)
        if steer.empty_result:
            matching = []
        shown = matching[(page - 1) * size: page * size]
        rows = [{"order_id": o["id"], "order_status": o["status"], "total_cents": o["total_cents"],
                 "placed_on": o["placed_on"]} for o in shown]
        return Reply({"orders": rows, "total": len(matching), "page": page, "has_more": page * size < len(matching)},
                     message=f"Showing {len(rows)} of {len(matching)} orders (page {page}).")

    def do_refund_order(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        order, amount = _find(state, args["order_id"]), args["amount_cents"]
        if order is None:
            return _not_found(args["order_id"])
        oid = order["id"]
        if order["status"] == "cancelled":
            return fail("ORDER_CANCELLED", f"Order {oid} was cancelled and its payment voided.", order_id=oid)
        if order["status"] != "delivered":
            return fail("ORDER_NOT_DELIVERED", f"Order {oid} is {order['status']}; refunds open after delivery.",
                        order_id=oid)
        age = (dt.date.fromisoformat(state["today"]) - dt.date.fromisoformat(order["delivered_on"])).days
        if age > REFUND_WINDOW_DAYS:
            return fail("REFUND_WINDOW_EXPIRED",
                        f"Order {oid} was delivered {age} days ago; refunds close after {REFUND_WINDOW_DAYS} days.",
                        order_id=oid)
        left = order["total_cents"] - order["refunded_cents"]
        if left == 0:
            return fail("ALREADY_REFUNDED", f"Order {oid} has been refunded in full.", order_id=oid)
        if amount > left:
            return fail("AMOUNT_EXCEEDS_REFUNDABLE", f"At most {money(left)} of order {oid} can still be refunded.",
                        order_id=oid)
        refunded, status = amount, OK
        message = f"Refunded {money(amount)} on order {oid} to the original payment method."
        if steer.partial_success and amount >= 2:
            refunded, status = amount // 2, PARTIAL
            message = (f"Only {money(refunded)} of {money(amount)} was refunded; the rest is held for manual review.")
        refund_id = f"RF-{70001 + len(state['refunds'])}"
        order["refunded_cents"] += refunded
        state["refunds"].append({"refund_id": refund_id, "order_id": oid, "amount_cents": refunded})
        return Reply({"order_id": oid, "refund_id": refund_id, "refund_processed": True,
                      "amount_refunded_cents": refunded, "total_refunded_cents": order["refunded_cents"],
                      "order_total_cents": order["total_cents"]}, message=message, status=status)

    def do_cancel_order(self, state: JSON, args: JSON, steer: Steering) -> Reply:
        order = _find(state, args["order_id"])
        if order is None:
            return _not_found(args["order_id"])
        oid, status = order["id"], order["status"]
        if status == "cancelled":
            return fail("ALREADY_CANCELLED", f"Order {oid} is already cancelled.", order_id=oid)
        if status in ("shipped", "delivered"):
            return fail(f"ALREADY_{status.upper()}", f"Order {oid} has {status}; request a return instead.",
                        order_id=oid)
        voided = order["total_cents"] - order["refunded_cents"]
        order.update(status="cancelled", refunded_cents=order["total_cents"])
        return Reply({"order_id": oid, "cancelled": True, "order_status": "cancelled", "refunded_cents": voided},
                     message=f"Order {oid} is cancelled; {money(voided)} will be released to the card.")

    # --- scripted agent ------------------------------------------------------------------------------------

    def valid_call(self, state: JSON, rng: random.Random) -> Call:
        orders = state["orders"]
        order = rng.choice(orders)
        roll = rng.random()
        if roll < 0.25:
            return Call("get_order", {"order_id": order["id"]})
        if roll < 0.45:
            args: JSON = {}
            if rng.random() < 0.4:
                args["status"] = rng.choice(ORDER_STATUSES)
            if rng.random() < 0.3:
                args["page"] = rng.choice([1, 2])
            return Call("list_orders", args)
        if roll < 0.8:
            today = dt.date.fromisoformat(state["today"])
            delivered = [o for o in orders if o["status"] == "delivered"] or orders
            refundable = [o for o in delivered if o["delivered_on"] and o["total_cents"] > o["refunded_cents"]
                          and (today - dt.date.fromisoformat(o["delivered_on"])).days <= REFUND_WINDOW_DAYS]
            order = rng.choice(refundable if refundable and rng.random() < 0.75 else delivered)
            left = order["total_cents"] - order["refunded_cents"]
            amount = left if left and rng.random() < 0.4 else rng.randrange(1, max(left, 2))
            args = {"order_id": order["id"], "amount_cents": amount}
            if rng.random() < 0.5:
                args["reason"] = rng.choice(["damaged on arrival", "wrong size", "no longer needed", "late delivery"])
            return Call("refund_order", args)
        open_orders = [o for o in orders if o["status"] in ("pending", "processing")]
        return Call("cancel_order", {"order_id": rng.choice(open_orders or orders)["id"]})

    def invalid_call(self, state: JSON, rng: random.Random) -> Call:
        orders = state["orders"]
        unknown = f"ORD-{rng.randrange(90000, 99999)}"
        choice = rng.randrange(6)
        if choice == 0:
            return Call(rng.choice(["get_order", "cancel_order"]), {"order_id": unknown})
        if choice == 1:
            return Call("refund_order", {"order_id": unknown, "amount_cents": rng.randrange(100, 5000)})
        if choice == 2:  # policy: refund an order that has not been delivered
            undelivered = [o for o in orders if o["status"] != "delivered"] or orders
            order = rng.choice(undelivered)
            return Call("refund_order", {"order_id": order["id"], "amount_cents": order["total_cents"]})
        if choice == 3:  # policy: refund more than the order total
            order = rng.choice(orders)
            return Call("refund_order", {"order_id": order["id"], "amount_cents": order["total_cents"] + 500})
        if choice == 4:  # policy: cancel an order that already shipped or arrived
            shipped = [o for o in orders if o["status"] in ("shipped", "delivered")] or orders
            return Call("cancel_order", {"order_id": rng.choice(shipped)["id"]})
        return Call("list_orders", rng.choice([{"status": "refunded"}, {"page": 0}, {"sort": "price"}]))


def _find(state: JSON, order_id: str) -> JSON | None:
    return next((o for o in state["orders"] if o["id"] == order_id), None)


def _not_found(order_id: str) -> Reply:
    return fail("ORDER_NOT_FOUND", f"No order {order_id} for this customer.", order_id=order_id)


def _orders_matching(state: JSON, args: JSON) -> list[JSON]:
    """The orders a listing with these arguments pages through, in the state's (newest first) order."""
    return [o for o in state["orders"] if args.get("status") in (None, o["status"])]
