#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# gateway/gw.h's rule: dependencies run handlers -> core. The HTTP core (its .c files and its
# headers gw.h and core.h) never includes the handlers' header gateway/s3.h and never names a
# handler-layer function (gw_s3_*, gw__s3_*, the XML builders and parsers of xml.c, the pure
# S3 helpers of s3_http.c). Prints each violation; exits 1 if there is one.
src=${1:?usage: check_layering.sh GATEWAY_DIR}
core="server.c head.c route.c auth.c body.c respond.c metrics.c async.c gw.h core.h head.h"
pattern='gateway/s3\.h|\bgw_+s3_|\bgw_xml_(open|close|elem|elemf|start|end|parse|check|child)|\bgw_(range_parse|cond_eval|etag_list_match|token_encode|token_decode|parse_max|canned_acl|tags_validate|tagging_query_parse)'
bad=0
for f in $core; do
    [ -f "$src/$f" ] || { echo "missing core file $src/$f"; bad=1; continue; }
    # Comments may name the handlers (the rule itself does); code may not.
    if sed -e 's|/\*.*\*/||g' -e '/\/\*/,/\*\//d' "$src/$f" | grep -nE "$pattern"; then
        echo "^ $f: the HTTP core calls into the S3 handlers (gateway/gw.h forbids it)"
        bad=1
    fi
done
[ $bad -eq 0 ] && echo "layering ok: handlers -> core only"
exit $bad
