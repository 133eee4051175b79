"""Pure parsers from raw documents to typed facts (registered with llmdoctor.derive)."""
