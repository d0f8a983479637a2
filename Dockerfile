# llmload on the official Locust image: one image for the master and every worker.
#
# NOT BUILT HERE: the machine llmload is developed and tested on reaches no container registry,
# so this file has never been built or run. It relies on little of the official image's layout:
# llmload goes into the Python that runs the image's `locust` (recent images: /opt/venv), and the
# image's user `locust` and working directory /home/locust stay. Build and try it once before
# relying on it:
#
#   docker build -t llmload .
#   docker run --rm -e OPENAI_API_KEY -v "$PWD/runs:/home/locust/runs" llmload \
#       -f /opt/llmload/locustfiles/chat.py --headless -u 32 -r 8 -t 5m --host http://vllm:8000 --csv runs/chat
#
# The image's entrypoint is `locust`: every argument above is Locust's (docs/distributed.md has
# the master and worker commands). The API key comes only from the environment.
# The base is pinned by digest: a tag can be moved to other bytes, a digest cannot. No registry is
# reachable where llmload is developed, so the digest was read from public sources, two that agree:
# a `docker pull locustio/locust:2.43.4` log ("Digest: sha256:ea785ebc…", in a public SRE course's
# lab report) and the tool table of achandrasekar/inference-perf, paper/neurips/README.md (Locust
# pinned as locustio/locust@sha256:ea785ebc…). No published digest of 2.47.0 (the Locust llmload's
# own tests run on) was found, so the image has 2.43.4 (>= 2.32, as pyproject.toml asks); llmload's
# unit tests and a local and a distributed run were checked on Locust 2.43.4.
# To refresh (or move to a newer Locust): `docker buildx imagetools inspect locustio/locust:TAG`
# prints the digest ("Digest:" line, the multi-platform index); write FROM locustio/locust:TAG@sha256:<it>.
FROM locustio/locust:2.43.4@sha256:ea785ebc49c887007e0e6809cc9a839edc0d2199a4ddf1d249f23f11fda52787

USER root
# Only what the install needs, never the whole build context (a local .env or key file stays out
# even where .dockerignore is missing).
COPY pyproject.toml setup.py README.md llmload-locust-help.pth llmload_locust_help.py /opt/llmload/
COPY llmload /opt/llmload/llmload
COPY locustfiles /opt/llmload/locustfiles
COPY scenarios /opt/llmload/scenarios
# A regular (not editable) install also places llmload-locust-help.pth, so `locust --help`
# lists llmload's options.
RUN "$(dirname "$(command -v locust)")/python" -m pip install --no-cache-dir /opt/llmload \
    && chown -R locust /opt/llmload
USER locust
