"""How an episode's end leaves the live screen (``LiveScreen.state``; before the end, the
screen's state is read from the driver's ``State``)."""

OVER_SUBMITTED, OVER_STOPPED, OVER_FAILED = "submitted", "stopped", "failed"
