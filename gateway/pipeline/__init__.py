"""The one inbound-to-outbound path every channel shares.

ingest (durable dedup + inbox) → dispatch (own-message filter, routing,
access policy) → conversation lanes (one turn at a time, coalescing,
mid-turn merge or queue) → turn (responder events, streamed previews,
transactional outbox) → delivery (render, split, pace, send or edit,
retry, mark delivered).
"""
