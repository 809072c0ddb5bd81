"""Call-local states: the records that share a value with the call stay, the rest are counted, and the largest
collection gives up records first when a budget needs it."""

from __future__ import annotations

from wmstudio.world.prompt.call_local import (
    call_local,
    drop_last_record,
    record_ids,
    touches,
    with_references,
)
from wmstudio.world.records import needles_of

ORDERS = {"today": "2025-03-01", "customer": {"id": "CUS-1", "name": "Ada"},
          "orders": [{"id": f"ORD-{i}", "status": "delivered" if i % 2 else "pending", "total_cents": 1000 + i,
                      "items": [{"sku": f"SKU-{i}", "qty": 1}]} for i in range(1, 11)]}


def test_needles_are_the_calls_strings_and_large_numbers_and_strict_keeps_ids():
    assert needles_of({"order_id": "ORD-3", "amount_cents": 500, "page": 2, "note": "x"}) == {"ORD-3", 500}
    assert needles_of({"status": "delivered", "id": "ORD-3", "path": "/tmp"}, strict=True) == {"ORD-3", "/tmp"}
    assert touches({"a": [{"b": "ORD-3"}]}, {"ORD-3"}) and not touches({"a": 3}, {"ORD-3"})
    assert touches({"path": "/home/sam/docs/todo.md"}, {"/home/sam/docs"})  # paths meet at a `/` boundary


def test_only_records_sharing_a_value_stay_and_their_small_parts_stay_whole():
    local, omitted = call_local(ORDERS, {"ORD-3"})
    assert local["today"] == "2025-03-01" and local["customer"] == ORDERS["customer"]
    assert local["orders"] == [ORDERS["orders"][2], "… 9 more"] and omitted == 9
    by_status, _ = call_local(ORDERS, {"pending"})
    assert [o["id"] for o in by_status["orders"][:-1]] == ["ORD-2", "ORD-4", "ORD-6", "ORD-8", "ORD-10"]


def test_maps_keyed_by_id_are_collections_too():
    state = {"users": {f"user_{i}": {"name": f"U{i}", "orders": [f"#W{i}"]} for i in range(5)}}
    local, omitted = call_local(state, {"#W3"})
    assert local == {"users": {"user_3": {"name": "U3", "orders": ["#W3"]}, "…": "4 more"}} and omitted == 4


def test_the_largest_collection_drops_its_last_record_first_and_counts_it():
    local, _ = call_local(ORDERS, {"delivered"})
    assert len(local["orders"]) == 6  # five delivered orders and the count
    assert drop_last_record(local)
    assert [o["id"] for o in local["orders"][:-1]] == ["ORD-1", "ORD-3", "ORD-5", "ORD-7"]
    assert local["orders"][-1] == "… 6 more"
    while drop_last_record(local):
        pass
    assert local["orders"] == ["… 10 more"]


TRIPS = {"flights": [{"flight": f"NX{i}", "date": f"2025-05-0{i}", "fares": {"basic": 100 * i}} for i in range(1, 6)],
         "bookings": [{"booking_id": "B7RFHM", "flight": "NX3", "passengers": 2},
                      {"booking_id": "QAQYHJ", "flight": "NX5", "passengers": 1}],
         "log": [{"event": "login", "at": "09:00"}, {"event": "login", "at": "09:00"}]}


def test_ids_are_map_keys_and_unique_id_fields_of_records():
    assert record_ids(TRIPS) == {"NX1", "NX2", "NX3", "NX4", "NX5", "B7RFHM", "QAQYHJ"}  # `flight` in `flights`
    assert record_ids({"users": {f"user_{i}": {"name": "x", "age": i} for i in range(3)}}) == {"user_0", "user_1",
                                                                                             "user_2"}
    assert record_ids({"rows": [{"id": "a"}, {"id": "a"}]}) == set()  # not unique: not an id


def test_a_record_the_call_names_brings_the_records_it_refers_to_one_hop():
    needles = with_references(TRIPS, {"B7RFHM"})
    assert needles == {"B7RFHM", "NX3"}
    local, _ = call_local(TRIPS, needles)
    assert [f["flight"] for f in local["flights"][:-1]] == ["NX3"]  # the booked flight, with its date and fares
    assert local["bookings"][0]["booking_id"] == "B7RFHM" and local["bookings"][-1] == "… 1 more"
    assert with_references(TRIPS, {"nothing"}) == {"nothing"}
