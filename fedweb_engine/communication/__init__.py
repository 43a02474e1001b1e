"""Communication: codecs and their registered options."""
