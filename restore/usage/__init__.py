"""Usage reports (`sessiond usage`, `usage/report`). Invariant: no storage here; the calls
come summed from the store's `Index.usage` (request.py asks it), and the report is made
from them by pure functions (report.py), so both stores answer alike."""
