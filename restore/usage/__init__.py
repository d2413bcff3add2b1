"""Usage reports (`sessiond usage`, `usage/report`): pure, so both stores answer alike: the
store's summed model calls (`Index.usage`) in, the periods, sessions or billing blocks out."""
