"""The plugin's attestation: one job per module, standard library only (the plugin imports it inside
SGLang).

- ``schema``: the document's records and its JSON form.
- ``location``: where the plugin writes it (and where a reader looks by default).
- ``writer``: the atomic, private write.
- ``reader``: the bounded read that records every directory on the way.
- ``trust``: whether a document read from disk describes the server behind a URL.

Validation with pydantic is the reader side's (``validator.sources.attestation``), off the plugin's path.
"""
