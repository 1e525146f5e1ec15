"""The playground's screens: the task picker, play and watch, the viewer and its forks, dialogs."""
