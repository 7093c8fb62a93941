"""Label Studio drives sporal: an adapter between its annotations and sporal's labels.

``sporal_client`` is a small typed client of sporal's REST API that other tools can use too;
``ls_client`` the calls of Label Studio's API the adapter needs; ``adapter`` the translation;
``window`` which tasks a refresh retires, creates and re-ranks;
``state`` its SQLite state; ``server`` the webhook endpoint and worker; ``cli`` the commands
``sporal labelstudio setup|run``.
"""
