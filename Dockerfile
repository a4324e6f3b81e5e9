# The research worker image (docker compose builds it; see docs/deploy.md).
#   docker build -t deepresearch-worker .
#   docker run --env-file .env -e TEMPORAL_ADDRESS=host:7233 deepresearch-worker
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DEEPRESEARCH_DATA_DIR=/data

WORKDIR /app

# Dependencies first, from pyproject.toml alone (with the s3 and tracing
# extras), so code changes do not reinstall them.
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
extras = p['optional-dependencies']; \
print('\n'.join(p['dependencies'] + extras['s3'] + extras['tracing']))" > /tmp/requirements.txt \
 && pip install --upgrade pip \
 && pip install -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

# The project itself (also puts the `deepresearch` CLI on PATH).
COPY README.md worker.py ./
COPY activities ./activities
COPY client ./client
COPY infra ./infra
COPY prompts ./prompts
COPY workflows ./workflows
RUN pip install --no-deps .

# Run as an unprivileged user; /data (blobs, payload fallback, reports) is a
# volume shared by all workers.
RUN useradd --create-home --uid 10001 --user-group deepresearch \
 && mkdir -p /data \
 && chown deepresearch:deepresearch /data
USER deepresearch
VOLUME ["/data"]

# The worker handles SIGTERM: running activities get DEEPRESEARCH_SHUTDOWN_GRACE_SECONDS.
CMD ["python", "worker.py"]
