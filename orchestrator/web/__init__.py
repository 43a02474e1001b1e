"""The server-rendered pages: URLs, views, forms, chart definitions, the report and the new-run previews."""
