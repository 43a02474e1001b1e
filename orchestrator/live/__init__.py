"""What the domain announces to open pages: the event payloads and their one ``group_send``
(``events``), and the receivers that turn the models' signals into events (``signals``). The web's
side of the same sockets, which forwards these events to browsers, is ``orchestrator.sockets``."""
