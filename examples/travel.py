"""Three tools that book a trip, shared by the examples: `find_flight` (cheap, but the airline API is down),
`find_train` (dearer, works) and `book` (the goal, a side effect). Every example must end with the train booked.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from portfolio.agent import action


@dataclass
class Trip:
    origin: str
    destination: str


@dataclass
class Offer:
    what: str
    price: int


@dataclass
class Booking:
    reference: str


@action(cost=1.0)
async def find_flight(trip: Trip) -> Offer:
    raise ConnectionError("airline API down")


@action(cost=3.0)
async def find_train(trip: Trip) -> Offer:
    await asyncio.sleep(0.01)  # a real tool would await an HTTP call here
    return Offer(f"train {trip.origin}-{trip.destination}", 89)


@action(goal=True, side_effects=True)
async def book(offer: Offer) -> Booking:
    return Booking(f"BK-{offer.what.split()[0].upper()}-{offer.price}")


TOOLS = [find_flight, find_train, book]
