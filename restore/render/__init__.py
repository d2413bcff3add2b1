"""A thread as a document: one walk over its items (`transcript.py`), drawn by a style —
the terminal's text (`sessiond show`), Markdown or HTML (`sessiond export`,
`thread/export`) — and the thread's JSON as the protocol's items (`document.py`).
Invariant: items are taken page by page from the store interface and never held whole,
so a document of any length is written in bounded memory; every recorded string is made
safe for where it goes (a terminal, Markdown, HTML) by the style that writes it.
"""
