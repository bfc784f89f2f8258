"""Print the inventory report (the program the demo's debug session launches)."""

from inventory.main import main

main()
