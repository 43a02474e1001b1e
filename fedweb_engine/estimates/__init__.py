"""What a spec will cost before it runs, asked from processes that do not load torch (the web server)."""
