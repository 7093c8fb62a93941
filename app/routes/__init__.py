"""Thin HTTP routers: validate, call a service, shape the answer."""
