"""A small memory-recall dataset made for bench_memory.py: customers' facts and questions about them.

20 simulated customers, 10 facts each (200), and 100 questions (5 per customer), each
answered by exactly one of that customer's facts. The questions paraphrase: they share as
few content words with their fact as the sentence allows ("contacted by text message" is
asked as "what is the right way to reach them?"), so a keyword index has to get lucky.
Each topic also has a second wording of the fact (``alt``), used to measure what cosine a
paraphrase of the same fact gets, against the same sentence with another value in it.

Everything is generated from a fixed seed: the same run gives the same dataset.

>>> facts, questions = build()
>>> len(facts), len(questions), len({f.user for f in facts})
(200, 100, 20)
"""

from __future__ import annotations

import random
from dataclasses import dataclass

USERS = [
    "Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivan", "Julia",
    "Kofi", "Lena", "Mateo", "Nora", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tomoko",
]  # fmt: skip

# Each slot's values; a product is (what the fact calls it, what the question calls it).
VALUES: dict[str, list[object]] = {
    "channel": ["text message", "email", "WhatsApp", "a phone call", "postal letter"],
    "hour": ["9 am", "10 am", "noon", "8 am"],
    "lang": ["Portuguese", "German", "Japanese", "Spanish", "French", "Polish"],
    "diet": ["vegan", "allergic to peanuts", "gluten intolerant", "vegetarian", "lactose intolerant"],
    "city": ["Lisbon, Rua Augusta 12", "Berlin, Kastanienallee 3", "Osaka, 2-5 Namba", "Leeds, 14 Park Row"],
    "window": ["weekday mornings", "Saturday afternoons", "evenings after 6 pm", "Tuesdays and Thursdays"],
    "product": [
        ("espresso machine", "coffee maker"),
        ("running shoes", "sneakers"),
        ("winter parka", "coat"),
        ("laptop stand", "monitor riser"),
        ("cordless drill", "power tool"),
        ("duvet cover", "bedding"),
        ("bluetooth headphones", "earphones"),
        ("yoga mat", "exercise pad"),
    ],
    "reason": [
        "the zip broke after a week",
        "it arrived scratched",
        "it was two sizes too small",
        "the colour was wrong",
    ],
    "size": ["M", "L", "S", "XL"],
    "shoe": ["38", "42", "44", "40"],
    "method": ["PayPal", "a Visa card", "bank transfer", "Apple Pay"],
    "amount": ["$200", "$500", "$50", "$1,000"],
    "tier": ["Gold", "Silver", "Platinum", "Bronze"],
    "year": ["2019", "2021", "2016", "2023"],
    "pet": [("dog", "Biscuit"), ("cat", "Miso"), ("parrot", "Kiwi"), ("rabbit", "Pepper")],
    "date": ["March 14", "July 2", "November 23", "January 9"],
    "month": ["April", "September", "February", "June"],
    "company": [("Acme Tools GmbH", "DE811907980"), ("Northwind Ltd", "GB123456789"), ("Vela SA", "PT501964843")],
    "brand": [("Bosch", "Makita"), ("Sony", "Bose"), ("Nike", "Adidas"), ("Philips", "Braun")],
    "tz": ["Tokyo (UTC+9)", "New York (UTC-5)", "Berlin (UTC+1)", "São Paulo (UTC-3)"],
    "plan": ["premium", "family", "basic", "student"],
    "day": ["1st", "15th", "28th", "5th"],
    "device": ["iPhone", "Android phone", "old Nokia feature phone"],
    "agent": ["Marta from tier-2 support", "the warehouse lead, Josef", "Priscilla in quality control"],
}

# topic: (fact, another wording of the same fact, a question that needs it). {name} is the customer.
TOPICS: dict[str, tuple[str, str, str]] = {
    "contact": (
        "{name} wants to be contacted by {channel} only.",
        "The only channel {name} accepts is {channel}.",
        "What is the right way to reach this customer?",
    ),
    "hours": (
        "Do not ring {name} before {hour}.",
        "Calls to {name} must wait until {hour} at the earliest.",
        "How early in the day may we phone them?",
    ),
    "language": (
        "{name}'s native tongue is {lang}, so write to them in {lang}.",
        "Replies to {name} should be in {lang}.",
        "Which language should our messages use?",
    ),
    "diet": (
        "{name} is {diet}.",
        "Food for {name} must suit someone {diet}.",
        "Are there any dietary restrictions for this person?",
    ),
    "address": (
        "Deliveries for {name} go to {city}.",
        "{name}'s shipping address is {city}.",
        "Where should the parcel be sent?",
    ),
    "window": (
        "Couriers can only find {name} at home on {window}.",
        "{name} is only in to receive packages on {window}.",
        "When can a driver drop things off?",
    ),
    "order": (
        "Order 4{num}: a {product} for {name}, delivered on {date}.",
        "{name} received a {product} on {date} (order 4{num}).",
        "When did the {product_q} arrive?",
    ),
    "return": (
        "{name} sent back the {product} because {reason}.",
        "The {product} was returned by {name}: {reason}.",
        "Why did they give back the {product_q}?",
    ),
    "size": (
        "{name} wears size {size} in shirts and {shoe} in shoes.",
        "Clothes for {name}: shirts in {size}, shoes in {shoe}.",
        "Which measurements fit this customer?",
    ),
    "payment": (
        "{name} pays with {method}.",
        "{name}'s preferred way to pay is {method}.",
        "How do they settle their bills?",
    ),
    "refund": (
        "Refunds for {name} above {amount} need a manager's sign-off.",
        "A manager must approve any refund over {amount} for {name}.",
        "Who has to agree before we reimburse this client a large sum?",
    ),
    "loyalty": (
        "{name} has been a {tier} member of the rewards club since {year}.",
        "{name} holds {tier} status in the loyalty programme, joined {year}.",
        "What level are they at in our points scheme?",
    ),
    "complaint": (
        "{name} complained that the courier left the box out in the rain.",
        "A package for {name} was once dropped outside during a storm and got wet.",
        "Has a past shipment gone wrong for them?",
    ),
    "gift": (
        "{name} always wants orders gift-wrapped, with no receipt inside.",
        "Wrap every purchase of {name}'s as a present and leave the invoice out.",
        "How should their presents be packaged?",
    ),
    "pet": (
        "{name} has a {pet} called {petname}.",
        "{petname} is {name}'s {pet}.",
        "Does the customer own any animals?",
    ),
    "birthday": (
        "{name}'s birthday is on {date}.",
        "{name} was born on {date}.",
        "On what day should we send a card for their anniversary of birth?",
    ),
    "newsletter": (
        "{name} unsubscribed from marketing emails in {month}.",
        "Since {month}, {name} has opted out of promotional mail.",
        "Can we send them advertising?",
    ),
    "access": (
        "{name} is visually impaired: use large print and documents that work with a screen reader.",
        "Send {name} large-print, screen-reader friendly documents; their eyesight is poor.",
        "Does this person need accommodations to read what we send?",
    ),
    "company": (
        "{name} buys for {company}, so invoices carry the VAT number {vat}.",
        "Invoices for {name} go to {company}, VAT {vat}.",
        "What tax details belong on their bills?",
    ),
    "brand": (
        "{name} likes {brand} products and dislikes {brand2}.",
        "{name} prefers {brand} and avoids {brand2}.",
        "Which manufacturer does the client favour?",
    ),
    "timezone": (
        "{name} lives in {tz}.",
        "{name}'s local time is that of {tz}.",
        "What clock offset applies where this customer is?",
    ),
    "plan": (
        "{name} has a monthly {plan} plan that renews on the {day}.",
        "The {plan} subscription of {name} renews every month on the {day}.",
        "When is their recurring charge taken?",
    ),
    "device": (
        "{name} uses an {device}; links must open on mobile.",
        "{name} reads everything on an {device}.",
        "What kind of handset does the customer have?",
    ),
    "kids": (
        "{name} has two children, aged 4 and 7.",
        "{name} is a parent of a four-year-old and a seven-year-old.",
        "Are there young kids in the household?",
    ),
    "escalate": (
        "If {name} reports a broken item, escalate to {agent}.",
        "Damaged goods reported by {name} go straight to {agent}.",
        "Who handles it when something arrives smashed?",
    ),
}


@dataclass(frozen=True)
class Fact:
    """One remembered item: its customer (the namespace), topic, text and another wording."""

    id: int
    user: str
    topic: str
    text: str
    alt: str
    swapped: str  # the same wording with other values: a different fact that reads alike


@dataclass(frozen=True)
class Question:
    """A question about one customer that exactly one fact (``fact_id``) answers."""

    user: str
    text: str
    fact_id: int


def _slots(rng: random.Random, name: str) -> dict[str, str]:
    pick = {key: rng.choice(values) for key, values in VALUES.items()}
    product, pet, company, brand = pick["product"], pick["pet"], pick["company"], pick["brand"]
    flat = {k: v for k, v in pick.items() if isinstance(v, str)}
    return {
        **flat,
        "name": name,
        "num": str(rng.randrange(1000, 9999)),
        "product": product[0],  # type: ignore[index]
        "product_q": product[1],  # type: ignore[index]
        "pet": pet[0],  # type: ignore[index]
        "petname": pet[1],  # type: ignore[index]
        "company": company[0],  # type: ignore[index]
        "vat": company[1],  # type: ignore[index]
        "brand": brand[0],  # type: ignore[index]
        "brand2": brand[1],  # type: ignore[index]
    }


def build(seed: int = 21) -> tuple[list[Fact], list[Question]]:
    """The 200 facts and 100 questions, the same for the same seed."""
    rng = random.Random(seed)
    facts: list[Fact] = []
    questions: list[Question] = []
    for name in USERS:
        topics = rng.sample(sorted(TOPICS), 10)
        asked = set(rng.sample(topics, 5))
        for topic in topics:
            fact, alt, question = TOPICS[topic]
            slots, other = _slots(rng, name), _slots(rng, name)
            item = Fact(len(facts), name, topic, fact.format(**slots), alt.format(**slots), fact.format(**other))
            facts.append(item)
            if topic in asked:
                questions.append(Question(name, question.format(**slots), item.id))
    return facts, questions
