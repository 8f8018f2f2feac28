"""Fault injection: server and Redis processes killed while clients write."""
