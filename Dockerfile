# The sporal service. Same entry point as on a laptop: `sporal serve`, configured by SPORAL_*.
# Build: docker build -t sporal .      Run (SQLite in a volume): docker run -p 8000:8000 -v sporal:/data sporal
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY app ./app
COPY models ./models
COPY migrations ./migrations
COPY reasoning ./reasoning
COPY benchmarks ./benchmarks
RUN pip install . -c constraints.txt && rm -rf /src

RUN useradd --create-home --uid 10001 sporal && mkdir /data && chown sporal /data
USER sporal
WORKDIR /data

# SQLite by default (a file in the /data volume); docker-compose.yml points it at PostgreSQL.
ENV SPORAL_DATABASE_URL=sqlite:////data/sporal.db
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)"

# `serve` applies the migrations (once, under a lock) and starts uvicorn.
CMD ["sporal", "serve", "--host", "0.0.0.0", "--port", "8000"]
