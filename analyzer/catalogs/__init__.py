"""Generated SGLang flag catalogs (JSON), one per release; see analyzer/catalog_build.py."""
