"""The service layer: everything between the HTTP routes and the tables / reasoning core."""
