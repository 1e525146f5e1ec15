"""The widgets the screens are built from: panes per language, the output, the agent panel, the viewer's pieces."""
