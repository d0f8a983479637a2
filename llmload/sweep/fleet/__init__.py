"""A fleet in a sweep: K replicas of one ``serve:`` template behind a real router (nginx or
LiteLLM's proxy), started per cell and stopped with it. ``routers`` says which routers and
policies exist (pure); ``nginx`` and ``litellm`` write each one's config (pure, plus where the
program is); ``launch`` starts replicas and router and checks that every replica answers through
it (I/O); ``summary`` turns the cells into scaling efficiency, shares, cache locality and the
plan (pure); ``render`` writes that part of sweep.md.
"""
