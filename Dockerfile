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
# The image's entrypoint is `locust`: every argument above is Locust's (README "Running across
# machines" has the master and worker commands). The API key comes only from the environment.
FROM locustio/locust:2.47.0

USER root
COPY . /opt/llmload
# A regular (not editable) install also places llmload-locust-help.pth, so `locust --help`
# lists llmload's options.
RUN "$(dirname "$(command -v locust)")/python" -m pip install --no-cache-dir /opt/llmload \
    && chown -R locust /opt/llmload
USER locust
