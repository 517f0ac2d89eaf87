"""Everyday tools with canned, deterministic answers; every call is recorded."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from planrail import tool
from planrail.plan.tools import Tool

CALLS: list[tuple[str, dict[str, Any]]] = []
"""Every call made, in order (the evaluation clears it per goal)."""


def _log(tool_name: str, /, **args: Any) -> None:
    CALLS.append((tool_name, args))


class Weather(BaseModel):
    temp_c: float
    summary: str


class Results(BaseModel):
    results: list[str]
    top_url: str


class Page(BaseModel):
    title: str
    text: str


class Sent(BaseModel):
    message_id: str


class Contact(BaseModel):
    email: str
    phone: str


class Event(BaseModel):
    event_id: str


class Money(BaseModel):
    amount: float


class Quote(BaseModel):
    price: float


class Translation(BaseModel):
    text: str


class Files(BaseModel):
    files: list[str]


class FileText(BaseModel):
    content: str


class Reminder(BaseModel):
    reminder_id: str


class Clock(BaseModel):
    time: str


@tool(side_effects="none")
def get_weather(city: str) -> Weather:
    """Current weather for a city."""
    _log("get_weather", city=city)
    return Weather(temp_c=18.5, summary=f"light rain in {city}")


@tool(side_effects="none")
def search_web(query: str) -> Results:
    """Search the web; returns result titles and the top result's URL."""
    _log("search_web", query=query)
    return Results(
        results=[f"{query}: overview", f"{query}: news"], top_url="https://example.org/a"
    )


@tool(side_effects="none")
def fetch_page(url: str) -> Page:
    """Download a web page and return its title and text."""
    _log("fetch_page", url=url)
    return Page(title="Example page", text="Planrail plans tool calls as a graph.")


@tool(side_effects="unsafe")
def send_email(to: str, subject: str, body: str) -> Sent:
    """Send an email."""
    _log("send_email", to=to, subject=subject, body=body)
    return Sent(message_id="m_1")


@tool(side_effects="none")
def get_contact(name: str) -> Contact:
    """Look up a person's email address and phone number."""
    _log("get_contact", name=name)
    return Contact(email=f"{name.split()[0].lower()}@example.com", phone="+1 555 0100")


@tool(side_effects="keyed")
def create_event(title: str, date: str) -> Event:
    """Create a calendar event on a date (YYYY-MM-DD)."""
    _log("create_event", title=title, date=date)
    return Event(event_id="ev_1")


@tool(side_effects="none")
def convert_currency(amount: float, from_currency: str, to_currency: str) -> Money:
    """Convert an amount of money between currencies (ISO codes like USD, EUR)."""
    _log("convert_currency", amount=amount, from_currency=from_currency, to_currency=to_currency)
    return Money(amount=round(amount * 0.92, 2))


@tool(side_effects="none")
def get_stock_price(symbol: str) -> Quote:
    """The latest price of a stock by its ticker symbol."""
    _log("get_stock_price", symbol=symbol)
    return Quote(price=123.45)


@tool(side_effects="none")
def translate(text: str, language: str) -> Translation:
    """Translate text into a language."""
    _log("translate", text=text, language=language)
    return Translation(text=f"[{language}] {text}")


@tool(side_effects="none")
def list_files(folder: str) -> Files:
    """List the files in a folder."""
    _log("list_files", folder=folder)
    return Files(files=[f"{folder}/notes.txt", f"{folder}/todo.txt"])


@tool(side_effects="none")
def read_file(path: str) -> FileText:
    """Read a text file."""
    _log("read_file", path=path)
    return FileText(content="buy milk; call Bob")


@tool(side_effects="keyed")
def set_reminder(text: str, time: str) -> Reminder:
    """Set a reminder with a text at a time (HH:MM)."""
    _log("set_reminder", text=text, time=time)
    return Reminder(reminder_id="r_1")


@tool(side_effects="none")
def get_time(city: str) -> Clock:
    """The current local time in a city."""
    _log("get_time", city=city)
    return Clock(time="14:05")


TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        get_weather,
        search_web,
        fetch_page,
        send_email,
        get_contact,
        create_event,
        convert_currency,
        get_stock_price,
        translate,
        list_files,
        read_file,
        set_reminder,
        get_time,
    )
}
