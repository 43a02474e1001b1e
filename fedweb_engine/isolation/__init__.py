"""Process isolation: a round's client training in a child process."""
