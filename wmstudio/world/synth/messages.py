"""What a synthetic world says in its `message` field, in its own voice and its own nouns.

Each world draws a voice (terse, plain or formal); every template names the world's entities, so a message never
borrows a demo world's words ("No order ORD-…")."""

from __future__ import annotations

TEMPLATES: dict[str, tuple[str, str, str]] = {  # kind -> (terse, plain, formal)
    "not_found": ("{Entity} {id} not found.", "There is no {entity} with id {id}.",
                  "No {entity} exists with the identifier {id}."),
    "status": ("{Entity} {id} is {current}; needs {expected}.",
               "Only {expected} {plural} can be changed this way; {id} is {current}.",
               "The {entity} {id} is in state {current}; this operation requires {expected}."),
    "quantity": ("{id}: {have} {quantity_left}, {need} needed.",
                 "{Entity} {id} has only {have} {quantity_left}; this needs {need}.",
                 "Insufficient {quantity} on {entity} {id}: {have} available, {need} required."),
    "window": ("{when} is outside {start} to {end}.",
               "{when} is not allowed: pick a time from {start} to {end}.",
               "The requested time {when} falls outside the permitted window ({start} to {end})."),
    "owner": ("{Entity} {id} is not yours.", "{Entity} {id} belongs to another {actor}.",
              "The {actor} {who} does not own {entity} {id}."),
    "duplicate": ("'{label}' exists.", "A {entity} called '{label}' already exists.",
                  "A {entity} with the name '{label}' is already registered."),
    "locked": ("{Entity} {id} is {current}: read-only.", "{Entity} {id} is {current} and can no longer be edited.",
               "Edits are not permitted on {entity} {id} in state {current}."),
    "delete": ("{Entity} {id} is {current}: cannot delete.",
               "Only {expected} {plural} can be deleted; {id} is {current}.",
               "Deletion is restricted to {expected} {plural}; {entity} {id} is {current}."),
    "empty_update": ("Nothing to change.", "Give at least one field to change.",
                     "The request contains no fields to update."),
    "same": ("Same {entity} twice.", "Source and target are the same {entity}.",
             "A transfer requires two different {plural}."),
    "batch_none": ("No {plural} updated.", "None of the {count} {plural} could be updated.",
                   "The batch was rejected: none of the {count} {plural} could be processed."),
    "token": ("Bad page token.", "That page token does not belong to this search.",
              "The supplied page token is invalid for this query."),
    "time_format": ("Bad time '{value}'.", "'{value}' is not a time like 2025-04-01T09:00:00Z.",
                    "The value '{value}' is not an RFC 3339 UTC timestamp."),
    "owner_missing": ("{Actor} {id} not found.", "There is no {actor} with id {id}.",
                      "No {actor} exists with the identifier {id}."),
    "credentials": ("Wrong credentials.", "The {user} or {secret} is wrong.",
                    "Authentication failed: the {user} and {secret} do not match."),
    "expired": ("Session expired.", "The session expired at {at}: sign in again.",
                "The session token expired at {at}; authenticate again to continue."),
    "bad_token": ("Unknown session.", "That session token is not recognised: sign in again.",
                  "The session token supplied is not valid."),
    "no_auth": ("Sign in first.", "Sign in first: this call needs a {session}.",
                "This operation requires a valid {session}."),
    "missing": ("'{name}' required.", "Missing required field '{name}'.", "The parameter '{name}' is required."),
    "unknown_tool": ("No operation '{name}'.", "'{name}' is not an operation of this API.",
                     "The operation '{name}' is not supported by this service."),
    "rate": ("Slow down: retry in {seconds}s.", "Too many requests: retry in {seconds} seconds.",
             "Request rate exceeded; retry after {seconds} seconds."),
    "transient": ("{code}: try again.", "The {service} service could not finish the request ({code}).",
                  "The request could not be completed because of a temporary fault ({code})."),
    # successes, shown under the verbose directive
    "got": ("{Entity} {id}.", "Found {entity} {id}.", "Returned {entity} {id}."),
    "page": ("{shown} of {matching}.", "Showing {shown} of {matching} {plural}.",
             "Returned {shown} {plural} of {matching} matching."),
    "created": ("Created {id}.", "Created {entity} {id}.", "The {entity} {id} was created."),
    "updated": ("Updated {id}.", "Updated {entity} {id}.", "The {entity} {id} was updated."),
    "deleted": ("Deleted {id}.", "Deleted {entity} {id}.", "The {entity} {id} was deleted."),
    "acted": ("{Verb}: {id}.", "{Entity} {id}: {verb} done.", "The operation {verb} completed on {entity} {id}."),
    "partial": ("Half done: {done} of {asked}.", "Only {done} of {asked} could be processed now.",
                "The operation completed in part: {done} of {asked} processed."),
    "moved": ("Moved {amount}.", "Moved {amount} from {source} to {target}.",
              "{amount} were transferred from {source} to {target}."),
    "batched": ("{count} updated.", "Updated {count} {plural}.", "{count} {plural} were updated."),
    "signed_in": ("Signed in.", "Signed in; the session lasts {period}.",
                  "Authentication succeeded; the session is valid for {period}."),
}
VOICES = ("terse", "plain", "formal")


def say(voice: str, kind: str, **words: object) -> str:
    """The message of `kind` in `voice`, with the capitalised forms ({Entity}, {Actor}, {Verb}) filled in, and
    {quantity_left} ("stock left", but "seats left", not "seats left left")."""
    template = TEMPLATES[kind][VOICES.index(voice)]
    quantity = words.get("quantity")
    if isinstance(quantity, str):
        words["quantity_left"] = quantity if quantity.endswith(" left") else f"{quantity} left"
    extra = {name.capitalize(): str(value)[:1].upper() + str(value)[1:]
             for name, value in words.items() if isinstance(value, str)}
    return template.format(**words, **extra)
