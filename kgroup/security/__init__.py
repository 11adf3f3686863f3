"""Kafka's security model as pure code: principals, SASL mechanisms (PLAIN, SCRAM-SHA-256/512,
OAUTHBEARER unsecured), SCRAM credentials, ACLs and the authorizer. Nothing here does I/O on a
socket: the broker's server layer (``kgroup/broker/authentication.py``) feeds it tokens and
asks it questions, and the unit tests drive it directly."""
