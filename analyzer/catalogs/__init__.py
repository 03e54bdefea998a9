"""Generated SGLang flag catalogs (JSON), one per release; see analyzer/sglang/catalog_build.py."""
