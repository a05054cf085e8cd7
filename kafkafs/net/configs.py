"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

A topic's configuration is what the mount's ``config`` file and ``kafkafs topics --alter``
edit: the broker defaults with the topic's overrides, stored by the log manager
(:meth:`~kafkafs.log.manager.LogManager.alter_topic_config`), so a change through any door
is seen by all. As Kafka 4.1 answers (``ConfigHelper``, ``ConfigurationControlManager``):

* DescribeConfigs of a topic lists every topic config with its effective value, source 1
  (TOPIC_CONFIG) for an override, 4 (STATIC_BROKER_CONFIG) for a value server.properties
  changed, else 5 (DEFAULT_CONFIG), and its type; Kafka's topic configs that mean nothing
  on one kafkafs node (replication, tiered storage, codec levels) are listed with Kafka's
  defaults as read-only; a missing topic is UNKNOWN_TOPIC_OR_PARTITION, a resource type
  Kafka does not know fails every resource with INVALID_REQUEST. A broker (its node id, or
  ``""`` for the cluster defaults, none here) lists the broker keys kafkafs reads;
* AlterConfigs replaces a topic's whole override set; IncrementalAlterConfigs applies SET,
  DELETE, APPEND and SUBTRACT (lists: ``cleanup.policy``) key by key; a bad key or value is
  INVALID_CONFIG before a missing topic is UNKNOWN_TOPIC_OR_PARTITION, the whole resource
  or none of it is applied, ``validateOnly`` writes nothing. Broker configs cannot be
  changed at run time (INVALID_REQUEST).
"""

from __future__ import annotations

import trio

from ..log.config import LogConfig, broker_properties
from ..log.errors import InvalidConfigError, InvalidTopicError, LogError
from ..log.names import validate_topic
from . import errors as K

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
_KNOWN_TYPES = {0, 2, 4, 8, 16, 32}

# ConfigType ids: BOOLEAN 1, STRING 2, INT 3, SHORT 4, LONG 5, DOUBLE 6, LIST 7
_TYPES = {"cleanup.policy": 7, "compression.type": 2, "message.timestamp.type": 2,
          "min.cleanable.dirty.ratio": 6, "preallocate": 1, "segment.bytes": 3,
          "segment.index.bytes": 3, "index.interval.bytes": 3, "max.message.bytes": 3,
          "kafkafs.batch.size": 3}
_LISTS = {"cleanup.policy"}
#: Kafka's topic configs with no meaning on one kafkafs node: listed, never changed
_FIXED = {"compression.gzip.level": ("-1", 3), "compression.lz4.level": ("9", 3),
          "compression.zstd.level": ("3", 3),
          "follower.replication.throttled.replicas": ("", 7),
          "leader.replication.throttled.replicas": ("", 7),
          "local.retention.bytes": ("-2", 5), "local.retention.ms": ("-2", 5),
          "min.insync.replicas": ("1", 3), "remote.log.copy.disable": ("false", 1),
          "remote.log.delete.on.disable": ("false", 1), "remote.storage.enable": ("false", 1),
          "unclean.leader.election.enable": ("false", 1)}


def topic_configs(broker, config: LogConfig, overrides: dict) -> list[dict]:
    """Every topic config of ``config`` as DescribeConfigs lists it (name, value, source,
    type, read-only)."""
    defaults = LogConfig().to_properties()
    broker_values = broker.config.log.to_properties()
    out = []
    for key, value in config.to_properties().items():
        if key in overrides:
            source = 1
        elif broker_values.get(key) != defaults.get(key):
            source = 4
        else:
            source = 5
        out.append({"name": key, "value": value, "configSource": source,
                    "configType": _TYPES.get(key, 5), "readOnly": False})
    for key, (value, ctype) in _FIXED.items():
        out.append({"name": key, "value": value, "configSource": 5, "configType": ctype,
                    "readOnly": True})
    return out


def _entry(c: dict, synonyms: bool, docs: bool) -> dict:
    return {"name": c["name"], "value": c["value"], "readOnly": c["readOnly"],
            "configSource": c["configSource"], "isSensitive": False,
            "synonyms": [{"name": c["name"], "value": c["value"], "source": c["configSource"]}]
            if synonyms and c["configSource"] in (1, 4) else [],
            "configType": c["configType"], "documentation": None if not docs else ""}


async def describe_configs(broker, request, conn) -> dict:
    """``ConfigHelper.describeConfigs``: topic and broker configs."""
    body = request.body
    synonyms = body.get("includeSynonyms", False)
    docs = body.get("includeDocumentation", False)
    resources = body["resources"]
    if any(r["resourceType"] not in _KNOWN_TYPES or r["resourceType"] == 0 for r in resources):
        return {"throttleTimeMs": 0, "results": [
            {"errorCode": K.INVALID_REQUEST, "errorMessage": None,
             "resourceType": r["resourceType"], "resourceName": r["resourceName"],
             "configs": []} for r in resources]}
    manager = broker.manager
    results = []
    for r in resources:
        rtype, name, keys = r["resourceType"], r["resourceName"], r["configurationKeys"]
        res = {"errorCode": K.NONE, "errorMessage": "", "resourceType": rtype,
               "resourceName": name, "configs": []}
        if rtype == TOPIC:
            try:
                validate_topic(name)
            except InvalidTopicError as exc:
                res.update(errorCode=K.INVALID_TOPIC_EXCEPTION, errorMessage=str(exc))
                results.append(res)
                continue
            if not manager.partitions(name):
                res["errorCode"] = K.UNKNOWN_TOPIC_OR_PARTITION
                results.append(res)
                continue
            entries = topic_configs(broker, manager.topic_config(name),
                                    manager.topic_overrides(name))
        elif rtype == BROKER:
            if name == "":
                entries = []
            elif not name.lstrip("-").isdigit():
                res.update(errorCode=K.INVALID_REQUEST,
                           errorMessage=f"Broker id must be an integer, but it is: {name}")
                results.append(res)
                continue
            elif int(name) != broker.node_id:
                res.update(errorCode=K.INVALID_REQUEST,
                           errorMessage=f"Unexpected broker id, expected {broker.node_id} or "
                           f"empty string, but received {name}")
                results.append(res)
                continue
            else:
                entries = [{"name": k, "value": v, "configSource": 4, "configType": 2,
                            "readOnly": True}
                           for k, v in sorted(broker_properties(broker.config).items())]
        else:
            res.update(errorCode=K.INVALID_REQUEST,
                       errorMessage=f"Unsupported resource type {rtype} on kafkafs")
            results.append(res)
            continue
        if keys:
            entries = [c for c in entries if c["name"] in set(keys)]
        res["configs"] = [_entry(c, synonyms, docs) for c in entries]
        results.append(res)
    return {"throttleTimeMs": 0, "results": results}


def _preprocess(resources) -> dict[int, tuple[int, str]]:
    """Kafka's broker-side checks: index -> (code, message) for a resource that fails."""
    out = {}
    seen: dict[tuple, int] = {}
    for i, r in enumerate(resources):
        key = (r["resourceType"], r["resourceName"])
        if key in seen:
            out[i] = out[seen[key]] = (K.INVALID_REQUEST,
                                       "Each resource must appear at most once.")
        seen[key] = i
        names = [c["name"] for c in r["configs"]]
        if len(names) != len(set(names)):
            out.setdefault(i, (K.INVALID_REQUEST, "Error due to duplicate config keys"))
        if r["resourceType"] not in (TOPIC, BROKER, 16, 32):
            out.setdefault(i, (K.INVALID_REQUEST, f"Unknown resource type {r['resourceType']}"))
    return out


def _refusal(resource: dict, preprocessed, null_refused) -> tuple[int, str] | None:
    """``(code, message)`` of a resource both alter apis refuse before looking at its
    topic: Kafka's broker-side checks (``preprocessed``, from :func:`_preprocess`), a null
    value where ``null_refused(config)`` says it is not taken, any resource but a topic."""
    if preprocessed:
        return preprocessed
    nulls = [c["name"] for c in resource["configs"] if null_refused(c)]
    if nulls:
        return K.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}"
    if resource["resourceType"] != TOPIC:
        return K.INVALID_REQUEST, ("kafkafs cannot change broker configs at run time: edit "
                                   "server.properties and restart")
    return None


async def _apply(broker, name: str, overrides: dict, validate_only: bool) -> tuple[int, str]:
    manager = broker.manager
    if name == "":
        return K.INVALID_REQUEST, "Default topic resources are not allowed."
    try:
        validate_topic(name)
    except InvalidTopicError as exc:
        return K.INVALID_TOPIC_EXCEPTION, str(exc)
    try:
        manager.config.log.with_overrides(overrides)
    except InvalidConfigError as exc:
        return K.INVALID_CONFIG, str(exc)
    if not manager.partitions(name):
        return K.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
    if validate_only:
        return K.NONE, None
    try:
        await trio.to_thread.run_sync(manager.alter_topic_config, name, overrides)
    except (LogError, OSError) as exc:
        return K.code_of(exc), str(exc)
    return K.NONE, None


async def alter_configs(broker, request, conn) -> dict:
    """Legacy AlterConfigs: replaces a topic's override set."""
    body = request.body
    bad = _preprocess(body["resources"])
    out = []
    for i, r in enumerate(body["resources"]):
        res = {"errorCode": K.NONE, "errorMessage": None, "resourceType": r["resourceType"],
               "resourceName": r["resourceName"]}
        refused = _refusal(r, bad.get(i), lambda c: c["value"] is None)
        if refused:
            res["errorCode"], res["errorMessage"] = refused
        else:
            res["errorCode"], res["errorMessage"] = await _apply(
                broker, r["resourceName"], {c["name"]: c["value"] for c in r["configs"]},
                body["validateOnly"])
        out.append(res)
    return {"throttleTimeMs": 0, "responses": out}


async def incremental_alter_configs(broker, request, conn) -> dict:
    """IncrementalAlterConfigs: SET, DELETE, APPEND, SUBTRACT per key, all or nothing
    per resource."""
    body = request.body
    bad = _preprocess(body["resources"])
    manager = broker.manager
    out = []
    for i, r in enumerate(body["resources"]):
        res = {"errorCode": K.NONE, "errorMessage": None, "resourceType": r["resourceType"],
               "resourceName": r["resourceName"]}
        refused = _refusal(r, bad.get(i),
                           lambda c: c["value"] is None and c["configOperation"] != 1)
        if refused:
            res["errorCode"], res["errorMessage"] = refused
        else:
            name = r["resourceName"]
            overrides = manager.topic_overrides(name)
            defaults = manager.config.log.to_properties()
            error = None
            for c in r["configs"]:
                key, op, value = c["name"], c["configOperation"], c["value"]
                if op == 0:
                    overrides[key] = value
                elif op == 1:
                    overrides.pop(key, None)
                elif op in (2, 3):
                    if key not in _LISTS:
                        error = (K.INVALID_CONFIG, f"Can't {'APPEND' if op == 2 else 'SUBTRACT'}"
                                 f" to key {key} because its type is not LIST.")
                        break
                    items = [x for x in overrides.get(key, defaults.get(key, "")).split(",")
                             if x]
                    given = [x.strip() for x in value.split(",") if x.strip()]
                    if op == 2:
                        items += [x for x in given if x not in items]
                    else:
                        items = [x for x in items if x not in given]
                    overrides[key] = ",".join(items)
                else:
                    error = (K.INVALID_REQUEST, f"Unknown operations type {op}")
                    break
            if error is None:
                error = await _apply(broker, name, overrides, body["validateOnly"])
            res["errorCode"], res["errorMessage"] = error
        out.append(res)
    return {"throttleTimeMs": 0, "responses": out}


HANDLERS = {32: describe_configs, 33: alter_configs, 44: incremental_alter_configs}
