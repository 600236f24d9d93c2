"""The plugin's attestation, standard library only (the plugin imports it inside SGLang): ``schema`` (the
records and their JSON), ``location`` (where it is written and looked for), ``writer`` (atomic, private),
``reader`` (bounded, recording every directory on the way) and ``trust`` (whether a document read from disk
describes the server behind a URL). Validation is the reader side's
(``validator.sources.server.attestation``).
"""
