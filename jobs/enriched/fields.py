"""The 131 fields of a Snowplow enriched event, in TSV order.

Source: the Scala Analytics SDK's `Event`.
"""

from __future__ import annotations

FIELD_NAMES: tuple[str, ...] = (
    "app_id", "platform", "etl_tstamp", "collector_tstamp", "dvce_created_tstamp", "event",
    "event_id", "txn_id", "name_tracker", "v_tracker", "v_collector", "v_etl",
    "user_id", "user_ipaddress", "user_fingerprint", "domain_userid", "domain_sessionidx", "network_userid",
    "geo_country", "geo_region", "geo_city", "geo_zipcode", "geo_latitude", "geo_longitude",
    "geo_region_name", "ip_isp", "ip_organization", "ip_domain", "ip_netspeed", "page_url",
    "page_title", "page_referrer", "page_urlscheme", "page_urlhost", "page_urlport", "page_urlpath",
    "page_urlquery", "page_urlfragment", "refr_urlscheme", "refr_urlhost", "refr_urlport", "refr_urlpath",
    "refr_urlquery", "refr_urlfragment", "refr_medium", "refr_source", "refr_term", "mkt_medium",
    "mkt_source", "mkt_term", "mkt_content", "mkt_campaign", "contexts", "se_category",
    "se_action", "se_label", "se_property", "se_value", "unstruct_event", "tr_orderid",
    "tr_affiliation", "tr_total", "tr_tax", "tr_shipping", "tr_city", "tr_state",
    "tr_country", "ti_orderid", "ti_sku", "ti_name", "ti_category", "ti_price",
    "ti_quantity", "pp_xoffset_min", "pp_xoffset_max", "pp_yoffset_min", "pp_yoffset_max", "useragent",
    "br_name", "br_family", "br_version", "br_type", "br_renderengine", "br_lang",
    "br_features_pdf", "br_features_flash", "br_features_java", "br_features_director", "br_features_quicktime",
    "br_features_realplayer", "br_features_windowsmedia", "br_features_gears", "br_features_silverlight",
    "br_cookies", "br_colordepth", "br_viewwidth",
    "br_viewheight", "os_name", "os_family", "os_manufacturer", "os_timezone", "dvce_type",
    "dvce_ismobile", "dvce_screenwidth", "dvce_screenheight", "doc_charset", "doc_width", "doc_height",
    "tr_currency", "tr_total_base", "tr_tax_base", "tr_shipping_base", "ti_currency", "ti_price_base",
    "base_currency", "geo_timezone", "mkt_clickid", "mkt_network", "etl_tags", "dvce_sent_tstamp",
    "refr_domain_userid", "refr_dvce_tstamp", "derived_contexts", "domain_sessionid", "derived_tstamp", "event_vendor",
    "event_name", "event_format", "event_version", "event_fingerprint", "true_tstamp",
)  # fmt: skip

FIELD_COUNT = len(FIELD_NAMES)
FIELD_INDEX: dict[str, int] = {name: i for i, name in enumerate(FIELD_NAMES)}

# Fields the tracker sends (the client-sent fields). Left out: fields the collector
# sets (collector_tstamp, v_collector, user_ipaddress, useragent, network_userid), the enrichments' output
# (etl_tstamp, geo_*, ip_*, parsed URL parts, marketing and referer attribution, user-agent parsing, currency
# conversion, derived_contexts, derived_tstamp, event_vendor/name/format/version), dvce_sent_tstamp (a retry
# sends the same event later) and event_id itself. Two copies that agree on all of these are natural copies.
DEFAULT_FINGERPRINT_FIELDS: tuple[str, ...] = (
    "app_id", "platform", "dvce_created_tstamp", "event", "txn_id", "name_tracker", "v_tracker",
    "user_id", "user_fingerprint", "domain_userid", "domain_sessionidx", "domain_sessionid",
    "page_url", "page_title", "page_referrer", "contexts",
    "se_category", "se_action", "se_label", "se_property", "se_value", "unstruct_event",
    "tr_orderid", "tr_affiliation", "tr_total", "tr_tax", "tr_shipping", "tr_city", "tr_state", "tr_country",
    "tr_currency", "ti_orderid", "ti_sku", "ti_name", "ti_category", "ti_price", "ti_quantity", "ti_currency",
    "pp_xoffset_min", "pp_xoffset_max", "pp_yoffset_min", "pp_yoffset_max",
    "br_lang", "br_features_pdf", "br_features_flash", "br_features_java", "br_features_director",
    "br_features_quicktime", "br_features_realplayer", "br_features_windowsmedia", "br_features_gears",
    "br_features_silverlight", "br_cookies", "br_colordepth", "br_viewwidth", "br_viewheight",
    "os_timezone", "dvce_screenwidth", "dvce_screenheight", "doc_charset", "doc_width", "doc_height",
    "refr_domain_userid", "refr_dvce_tstamp", "true_tstamp",
)  # fmt: skip

# How the Scala Analytics SDK (what Snowplow's transformer parses with) types each field's `Event` member.
# Every field not listed here is a string.
INSTANT_FIELDS: tuple[str, ...] = (
    "etl_tstamp", "collector_tstamp", "dvce_created_tstamp", "dvce_sent_tstamp", "refr_dvce_tstamp",
    "derived_tstamp", "true_tstamp",
)  # fmt: skip
INT_FIELDS: tuple[str, ...] = (
    "txn_id", "domain_sessionidx", "page_urlport", "refr_urlport", "ti_quantity", "pp_xoffset_min", "pp_xoffset_max",
    "pp_yoffset_min", "pp_yoffset_max", "br_viewwidth", "br_viewheight", "dvce_screenwidth", "dvce_screenheight",
    "doc_width", "doc_height",
)  # fmt: skip
DOUBLE_FIELDS: tuple[str, ...] = (
    "geo_latitude", "geo_longitude", "se_value", "tr_total", "tr_tax", "tr_shipping", "ti_price", "tr_total_base",
    "tr_tax_base", "tr_shipping_base", "ti_price_base",
)  # fmt: skip
BOOLEAN_FIELDS: tuple[str, ...] = (
    "br_features_pdf", "br_features_flash", "br_features_java", "br_features_director", "br_features_quicktime",
    "br_features_realplayer", "br_features_windowsmedia", "br_features_gears", "br_features_silverlight",
    "br_cookies", "dvce_ismobile",
)  # fmt: skip
# The SDK's non-optional fields: an empty value is an error ("Field X cannot be empty").
REQUIRED_FIELDS: tuple[str, ...] = ("collector_tstamp", "event_id", "v_collector", "v_etl")
