# A managed Kubernetes cluster for Shoal on AWS: EKS with a CPU node group and a GPU spot node
# group that scales to zero (the cluster autoscaler or Karpenter removes idle GPU nodes once KEDA
# scaled the GPU pool to zero), an S3 bucket, an IRSA role the Shoal pods use for it, what a
# fresh cluster lacks for the chart (the EBS CSI driver and a default gp3 StorageClass, the NVIDIA
# device plugin, the Prometheus Operator, the Secrets values-aws.yaml names) and the NATS, KEDA
# and Shoal releases.

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}

locals {
  bucket = var.bucket_name != "" ? var.bucket_name : "${var.name}-shoal-${data.aws_caller_identity.current.account_id}"
  tags   = merge({ "app.kubernetes.io/part-of" = "shoal", "shoal.dev/cluster" = var.name }, var.tags)
  # The Kubernetes service account the chart creates (release "shoal": <release>-<chart> collapses to "shoal").
  service_account = "shoal"
  oidc_issuer     = replace(aws_iam_openid_connect_provider.this.url, "https://", "")

  # NATS users of the chart's copy of deploy/nats/permissions.yaml (the one list), with its
  # placeholders filled for the default subject prefix "shoal", as the chart's
  # nats-authorization template and deploy/tools/nats-config.ts do.
  nats_permissions = yamldecode(file("${var.shoal_chart_path}/files/nats-permissions.yaml"))
  nats_components  = ["gateway", "worker", "sink", "documents", "classify"]
  nats_subjects = {
    for c in local.nats_components : c => {
      for kind in ["publish", "subscribe", "deny_publish"] : kind => [
        for subject in concat(try(local.nats_permissions.common[kind], []), try(local.nats_permissions.components[c][kind], [])) :
        replace(replace(replace(subject, "{prefix}", "shoal"), "{PREFIX}", "SHOAL"), "{lower}", "shoal")
      ]
    }
  }
  nats_users = [
    for c in local.nats_components : {
      user     = c
      password = random_password.nats[c].result
      permissions = merge(
        {
          publish   = { allow = local.nats_subjects[c].publish, deny = local.nats_subjects[c].deny_publish }
          subscribe = { allow = local.nats_subjects[c].subscribe }
        },
        { for k, v in { allow_responses = true } : k => v if try(local.nats_permissions.components[c].allow_responses, false) },
      )
    }
  ]
}

# ---------------------------------------------------------------- cluster

resource "aws_iam_role" "cluster" {
  name = "${var.name}-eks-cluster"
  assume_role_policy = jsonencode({
    Version   = "2012-10-17"
    Statement = [{ Effect = "Allow", Principal = { Service = "eks.amazonaws.com" }, Action = "sts:AssumeRole" }]
  })
  tags = local.tags
}

resource "aws_iam_role_policy_attachment" "cluster" {
  role       = aws_iam_role.cluster.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AmazonEKSClusterPolicy"
}

resource "aws_eks_cluster" "this" {
  name     = var.name
  version  = var.kubernetes_version
  role_arn = aws_iam_role.cluster.arn
  vpc_config {
    subnet_ids              = var.subnet_ids
    endpoint_private_access = true
    endpoint_public_access  = true
  }
  access_config {
    authentication_mode = "API_AND_CONFIG_MAP"
  }
  tags       = local.tags
  depends_on = [aws_iam_role_policy_attachment.cluster]
}

data "tls_certificate" "oidc" {
  url = aws_eks_cluster.this.identity[0].oidc[0].issuer
}

resource "aws_iam_openid_connect_provider" "this" {
  url             = aws_eks_cluster.this.identity[0].oidc[0].issuer
  client_id_list  = ["sts.amazonaws.com"]
  thumbprint_list = [data.tls_certificate.oidc.certificates[0].sha1_fingerprint]
  tags            = local.tags
}

# ---------------------------------------------------------------- node groups

resource "aws_iam_role" "node" {
  name = "${var.name}-eks-node"
  assume_role_policy = jsonencode({
    Version   = "2012-10-17"
    Statement = [{ Effect = "Allow", Principal = { Service = "ec2.amazonaws.com" }, Action = "sts:AssumeRole" }]
  })
  tags = local.tags
}

resource "aws_iam_role_policy_attachment" "node" {
  for_each = toset([
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
  ])
  role       = aws_iam_role.node.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/${each.value}"
}

resource "aws_eks_node_group" "cpu" {
  cluster_name    = aws_eks_cluster.this.name
  node_group_name = "${var.name}-cpu"
  node_role_arn   = aws_iam_role.node.arn
  subnet_ids      = var.subnet_ids
  instance_types  = var.cpu_instance_types
  capacity_type   = "ON_DEMAND"
  scaling_config {
    min_size     = var.cpu_nodes.min
    desired_size = var.cpu_nodes.desired
    max_size     = var.cpu_nodes.max
  }
  labels = { "shoal.dev/node" = "cpu" }
  tags   = local.tags
  lifecycle {
    ignore_changes = [scaling_config[0].desired_size]
  }
  depends_on = [aws_iam_role_policy_attachment.node]
}

# GPU spot nodes: minimum 0, tainted so only GPU worker pools land there. The cluster autoscaler
# scales from zero using the node group's labels and taints (tags below advertise them).
resource "aws_eks_node_group" "gpu" {
  cluster_name    = aws_eks_cluster.this.name
  node_group_name = "${var.name}-gpu-spot"
  node_role_arn   = aws_iam_role.node.arn
  subnet_ids      = var.subnet_ids
  instance_types  = var.gpu_instance_types
  capacity_type   = "SPOT"
  ami_type        = "AL2023_x86_64_NVIDIA"
  scaling_config {
    min_size     = 0
    desired_size = 0
    max_size     = var.gpu_max_nodes
  }
  labels = { "shoal.dev/node" = "gpu" }
  taint {
    key    = "nvidia.com/gpu"
    value  = "true"
    effect = "NO_SCHEDULE"
  }
  tags = merge(local.tags, {
    "k8s.io/cluster-autoscaler/enabled"                                = "true"
    "k8s.io/cluster-autoscaler/${var.name}"                            = "owned"
    "k8s.io/cluster-autoscaler/node-template/label/shoal.dev/node"     = "gpu"
    "k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu"     = "true:NoSchedule"
    "k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu" = "1"
  })
  lifecycle {
    ignore_changes = [scaling_config[0].desired_size]
  }
  depends_on = [aws_iam_role_policy_attachment.node]
}

# ---------------------------------------------------------------- storage and workload identity

resource "aws_s3_bucket" "shoal" {
  bucket = local.bucket
  tags   = local.tags
}

resource "aws_s3_bucket_public_access_block" "shoal" {
  bucket                  = aws_s3_bucket.shoal.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "shoal" {
  bucket = aws_s3_bucket.shoal.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_iam_role" "shoal" {
  name = "${var.name}-shoal"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Federated = aws_iam_openid_connect_provider.this.arn }
      Action    = "sts:AssumeRoleWithWebIdentity"
      Condition = {
        StringEquals = {
          "${local.oidc_issuer}:sub" = "system:serviceaccount:${var.namespace}:${local.service_account}"
          "${local.oidc_issuer}:aud" = "sts.amazonaws.com"
        }
      }
    }]
  })
  tags = local.tags
}

resource "aws_iam_role_policy" "shoal_bucket" {
  name = "shoal-bucket"
  role = aws_iam_role.shoal.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      { Effect = "Allow", Action = ["s3:ListBucket"], Resource = aws_s3_bucket.shoal.arn },
      { Effect = "Allow", Action = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], Resource = "${aws_s3_bucket.shoal.arn}/*" },
    ]
  })
}

# ---------------------------------------------------------------- what a fresh cluster lacks

# EBS CSI driver (an EKS add-on, IRSA role for its controller) and a default gp3 StorageClass:
# without them the NATS file stores, the sink's results and the GPU pods' cache volumes stay
# Pending (EKS 1.30+ marks no StorageClass as default).
resource "aws_iam_role" "ebs_csi" {
  name = "${var.name}-ebs-csi"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Federated = aws_iam_openid_connect_provider.this.arn }
      Action    = "sts:AssumeRoleWithWebIdentity"
      Condition = {
        StringEquals = {
          "${local.oidc_issuer}:sub" = "system:serviceaccount:kube-system:ebs-csi-controller-sa"
          "${local.oidc_issuer}:aud" = "sts.amazonaws.com"
        }
      }
    }]
  })
  tags = local.tags
}

resource "aws_iam_role_policy_attachment" "ebs_csi" {
  role       = aws_iam_role.ebs_csi.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
}

resource "aws_eks_addon" "ebs_csi" {
  cluster_name             = aws_eks_cluster.this.name
  addon_name               = "aws-ebs-csi-driver"
  service_account_role_arn = aws_iam_role.ebs_csi.arn
  tags                     = local.tags
  depends_on               = [aws_eks_node_group.cpu, aws_iam_role_policy_attachment.ebs_csi]
}

resource "kubernetes_storage_class_v1" "gp3" {
  metadata {
    name        = "gp3"
    annotations = { "storageclass.kubernetes.io/is-default-class" = "true" }
  }
  storage_provisioner    = "ebs.csi.aws.com"
  reclaim_policy         = "Delete"
  volume_binding_mode    = "WaitForFirstConsumer"
  allow_volume_expansion = true
  parameters             = { type = "gp3", encrypted = "true" }
  depends_on             = [aws_eks_addon.ebs_csi]
}

# The GPU AMI has the driver and the container toolkit, not the device plugin: without it no node
# advertises nvidia.com/gpu and GPU pods never schedule. Only on GPU nodes (tolerating their taint).
resource "helm_release" "nvidia_device_plugin" {
  name             = "nvidia-device-plugin"
  namespace        = "nvidia-device-plugin"
  create_namespace = true
  repository       = "https://nvidia.github.io/k8s-device-plugin"
  chart            = "nvidia-device-plugin"
  version          = var.nvidia_device_plugin_chart_version
  values = [yamlencode({
    tolerations = [{ key = "nvidia.com/gpu", operator = "Exists", effect = "NoSchedule" }]
    affinity = {
      nodeAffinity = {
        requiredDuringSchedulingIgnoredDuringExecution = {
          nodeSelectorTerms = [{ matchExpressions = [{ key = "shoal.dev/node", operator = "In", values = ["gpu"] }] }]
        }
      }
    }
  })]
  depends_on = [aws_eks_node_group.cpu]
}

# Prometheus Operator (CRDs, operator, Prometheus): values-aws.yaml renders a ServiceMonitor and a
# PrometheusRule labelled release=kube-prometheus-stack, and its token-backlog triggers query this
# Prometheus. Off: the Shoal release gets serviceMonitor/prometheusRule disabled (then point
# prometheus.serverAddress at another Prometheus, or turn tokenBacklog off, in your values).
resource "helm_release" "kube_prometheus_stack" {
  count            = var.install_kube_prometheus_stack ? 1 : 0
  name             = "kube-prometheus-stack"
  namespace        = "monitoring"
  create_namespace = true
  repository       = "https://prometheus-community.github.io/helm-charts"
  chart            = "kube-prometheus-stack"
  version          = var.kube_prometheus_stack_chart_version
  depends_on       = [kubernetes_storage_class_v1.gp3]
}

# The Secrets values-aws.yaml names (nats.auth.existingSecret, apiTokens.existingSecret), with
# random passwords and an API token (output api_token); the NATS release gets the same users.
resource "random_password" "nats" {
  for_each = toset(local.nats_components)
  length   = 32
  special  = false
}

resource "random_password" "api_token" {
  length  = 48
  special = false
}

resource "kubernetes_namespace_v1" "shoal" {
  metadata {
    name = var.namespace
  }
  depends_on = [aws_eks_node_group.cpu]
}

resource "kubernetes_secret_v1" "nats_users" {
  metadata {
    name      = "shoal-nats-users"
    namespace = kubernetes_namespace_v1.shoal.metadata[0].name
  }
  data = { for c in local.nats_components : "${c}-password" => random_password.nats[c].result }
}

resource "kubernetes_secret_v1" "api_tokens" {
  metadata {
    name      = "shoal-api-tokens"
    namespace = kubernetes_namespace_v1.shoal.metadata[0].name
  }
  data = { tokens = random_password.api_token.result }
}

# ---------------------------------------------------------------- releases

resource "helm_release" "nats" {
  name             = "nats"
  namespace        = "nats"
  create_namespace = true
  repository       = "https://nats-io.github.io/k8s/helm/charts/"
  chart            = "nats"
  version          = var.nats_chart_version
  values = [yamlencode({
    config = {
      cluster = { enabled = true, replicas = 3 }
      # The chart's max_file_store is the volume's size. Shoal sizes SHOAL_JOBS, SHOAL_RESULTS and
      # SHOAL_INGEST from the free store (a quarter each, at most 8 GiB; values-aws.yaml replicates
      # them on all three servers, nats.streamReplicas 3, so each server holds all of them):
      # 32 GiB or more gives them their full size, with the rest for the buckets and object store.
      jetstream = { enabled = true, fileStore = { pvc = { size = var.nats_store_size } } }
      monitor   = { enabled = true, port = 8222 }
      # Shoal's least-privilege users (the chart's Secret shoal-nats-users has their passwords).
      merge = { authorization = { users = local.nats_users } }
    }
  })]
  depends_on = [kubernetes_storage_class_v1.gp3]
}

resource "helm_release" "keda" {
  name             = "keda"
  namespace        = "keda"
  create_namespace = true
  repository       = "https://kedacore.github.io/charts"
  chart            = "keda"
  version          = var.keda_chart_version
  depends_on       = [aws_eks_node_group.cpu]
}

resource "helm_release" "shoal" {
  name             = "shoal"
  namespace        = var.namespace
  create_namespace = false
  chart            = var.shoal_chart_path
  # The values files, then what this module created: the bucket and its region, monitoring.
  values = concat([for f in var.shoal_values_files : file(f)], [yamlencode({
    s3             = { buckets = [aws_s3_bucket.shoal.bucket], region = var.region }
    serviceMonitor = { enabled = var.install_kube_prometheus_stack }
    prometheusRule = { enabled = var.install_kube_prometheus_stack }
  })])
  set {
    name  = "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn"
    value = aws_iam_role.shoal.arn
  }
  # The ScaledObjects need KEDA's CRDs; the workers need NATS; ServiceMonitor and PrometheusRule
  # the operator's CRDs; the pods the Secrets, the GPU pods the device plugin.
  depends_on = [
    helm_release.keda,
    helm_release.nats,
    helm_release.kube_prometheus_stack,
    helm_release.nvidia_device_plugin,
    kubernetes_secret_v1.nats_users,
    kubernetes_secret_v1.api_tokens,
  ]
}
