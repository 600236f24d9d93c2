"""The plugin's attestation, standard library only (the plugin imports it inside SGLang): ``schema`` (the
records and their JSON), ``location`` (where it is written and looked for), ``writer`` (atomic, private)
and ``trust`` (whether a document read from disk describes the server behind a URL). Reading and
validation are the reader side's (``validator.sources.server.attestation``).
"""
