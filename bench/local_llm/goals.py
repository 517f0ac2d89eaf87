"""The fixed goal set: each goal, the catalog it is planned with, the tool calls it needs.

Varied on purpose: single calls, chains passing a field on (``${a.field}``), fan-out (two
independent calls), and a branch. ``expected`` lists the tools whose calls the goal needs (each
at least once); extra calls are allowed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Goal:
    name: str
    goal: str
    tools: tuple[str, ...]
    expected: tuple[str, ...]
    kind: str


GOALS: tuple[Goal, ...] = (
    Goal(
        "weather",
        "What is the weather in Paris?",
        ("get_weather", "get_time", "search_web"),
        ("get_weather",),
        "single",
    ),
    Goal(
        "stock",
        "Get the stock price of AAPL.",
        ("get_stock_price", "search_web", "get_time"),
        ("get_stock_price",),
        "single",
    ),
    Goal(
        "time",
        "What time is it in Tokyo?",
        ("get_time", "get_weather", "translate"),
        ("get_time",),
        "single",
    ),
    Goal(
        "translate",
        "Translate 'good morning' into French.",
        ("translate", "search_web", "get_time"),
        ("translate",),
        "single",
    ),
    Goal(
        "files",
        "List the files in the folder docs.",
        ("list_files", "read_file", "get_time"),
        ("list_files",),
        "single",
    ),
    Goal(
        "convert",
        "Convert 100 USD to EUR.",
        ("convert_currency", "get_stock_price", "search_web"),
        ("convert_currency",),
        "single",
    ),
    Goal(
        "remind",
        "Remind me to call Bob at 17:00.",
        ("set_reminder", "get_contact", "get_time"),
        ("set_reminder",),
        "single",
    ),
    Goal(
        "event",
        "Create a calendar event 'Dentist' on 2026-12-03.",
        ("create_event", "set_reminder", "get_time"),
        ("create_event",),
        "single",
    ),
    Goal(
        "search_fetch",
        "Search the web for planrail and fetch the top result page.",
        ("search_web", "fetch_page", "translate"),
        ("search_web", "fetch_page"),
        "chain",
    ),
    Goal(
        "contact_mail",
        "Look up Alice's email address and send her an email saying hello.",
        ("get_contact", "send_email", "get_time"),
        ("get_contact", "send_email"),
        "chain",
    ),
    Goal(
        "weather_mail",
        "Get the weather in Berlin and email it to bob@example.com.",
        ("get_weather", "send_email", "get_contact"),
        ("get_weather", "send_email"),
        "chain",
    ),
    Goal(
        "read_translate",
        "Read the file notes.txt and translate its content into German.",
        ("read_file", "translate", "list_files"),
        ("read_file", "translate"),
        "chain",
    ),
    Goal(
        "fetch_translate",
        "Fetch the page https://example.org/a and translate its text into Spanish.",
        ("fetch_page", "translate", "search_web"),
        ("fetch_page", "translate"),
        "chain",
    ),
    Goal(
        "price_convert",
        "Get the stock price of MSFT and convert that amount from USD to EUR.",
        ("get_stock_price", "convert_currency", "get_time"),
        ("get_stock_price", "convert_currency"),
        "chain",
    ),
    Goal(
        "list_read",
        "List the files in the folder home, then read the file home/notes.txt.",
        ("list_files", "read_file", "translate"),
        ("list_files", "read_file"),
        "chain",
    ),
    Goal(
        "two_weather",
        "Get the weather in London and in Rome.",
        ("get_weather", "get_time", "send_email"),
        ("get_weather", "get_weather"),
        "fan-out",
    ),
    Goal(
        "two_prices",
        "Get the stock prices of AAPL and GOOG.",
        ("get_stock_price", "convert_currency", "search_web"),
        ("get_stock_price", "get_stock_price"),
        "fan-out",
    ),
    Goal(
        "time_weather",
        "Tell me the time and the weather in Madrid.",
        ("get_time", "get_weather", "translate"),
        ("get_time", "get_weather"),
        "fan-out",
    ),
    Goal(
        "two_contacts",
        "Look up the contacts of Alice and of Bob.",
        ("get_contact", "send_email", "get_time"),
        ("get_contact", "get_contact"),
        "fan-out",
    ),
    Goal(
        "search_mail",
        "Search the web for 'llama.cpp' and email the results to carol@example.com.",
        ("search_web", "send_email", "fetch_page"),
        ("search_web", "send_email"),
        "chain",
    ),
    Goal(
        "event_remind",
        "Create an event 'Team lunch' on 2026-12-10 and set a reminder 'lunch' at 11:30.",
        ("create_event", "set_reminder", "get_time"),
        ("create_event", "set_reminder"),
        "fan-out",
    ),
    Goal(
        "rain_branch",
        "Get the weather in Oslo; only if it rains, set a reminder 'take an umbrella' at 08:00.",
        ("get_weather", "set_reminder", "get_time"),
        ("get_weather", "set_reminder"),
        "branch",
    ),
)
"""22 goals (8 single calls, 7 chains, 6 fan-outs, 1 branch)."""
