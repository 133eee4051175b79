"""Pure parsers from raw documents to typed facts (registered with llmdoctor.engine.derive)."""
