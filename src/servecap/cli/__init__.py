"""Command-line interface: parse -> call the library -> render. No arithmetic lives here."""
