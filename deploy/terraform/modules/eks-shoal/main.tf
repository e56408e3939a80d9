# A managed Kubernetes cluster for Shoal on AWS: EKS with a CPU node group and a GPU spot node
# group that scales to zero (the cluster autoscaler or Karpenter removes idle GPU nodes once KEDA
# scaled the GPU pool to zero), an S3 bucket, an IRSA role the Shoal pods use for it, and the
# NATS, KEDA and Shoal releases.

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}

locals {
  bucket = var.bucket_name != "" ? var.bucket_name : "${var.name}-shoal-${data.aws_caller_identity.current.account_id}"
  tags   = merge({ "app.kubernetes.io/part-of" = "shoal", "shoal.dev/cluster" = var.name }, var.tags)
  # The Kubernetes service account the chart creates (release "shoal": <release>-<chart> collapses to "shoal").
  service_account = "shoal"
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
          "${replace(aws_iam_openid_connect_provider.this.url, "https://", "")}:sub" = "system:serviceaccount:${var.namespace}:${local.service_account}"
          "${replace(aws_iam_openid_connect_provider.this.url, "https://", "")}:aud" = "sts.amazonaws.com"
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
      cluster   = { enabled = true, replicas = 3 }
      jetstream = { enabled = true, fileStore = { pvc = { size = "20Gi" } } }
      monitor   = { enabled = true, port = 8222 }
    }
  })]
  depends_on = [aws_eks_node_group.cpu]
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
  create_namespace = true
  chart            = var.shoal_chart_path
  values           = [for f in var.shoal_values_files : file(f)]
  set {
    name  = "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn"
    value = aws_iam_role.shoal.arn
  }
  # The ScaledObjects need KEDA's CRDs; the workers need NATS.
  depends_on = [helm_release.keda, helm_release.nats]
}
