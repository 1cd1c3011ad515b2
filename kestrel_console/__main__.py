"""``python -m kestrel_console`` runs the kestrel-console command."""

from kestrel_console.entry import main

main()
